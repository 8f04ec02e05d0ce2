// libFuzzer target: a journal segment's bytes, read as recovery reads them
// (scan the checksummed records, load the checkpoint, apply the batches):
// damage is reported, never a crash.
import FuzzSupport
import TouchSyncJournal

func fuzzJournal(_ input: UnsafeRawBufferPointer) {
    let bytes = Array(input)
    let result = SegmentReader.read(bytes)
    _ = result.state?.digest
}

runFuzzer(fuzzJournal)
