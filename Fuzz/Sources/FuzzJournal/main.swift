// libFuzzer target: a journal segment's bytes, read as recovery reads them
// (scan the checksummed records, load the checkpoint, apply the batches):
// damage is reported, never a crash.
import TouchSyncJournal

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJournal(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    let result = SegmentReader.read(bytes)
    _ = result.state?.digest
    return 0
}
