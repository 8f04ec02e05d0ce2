// libFuzzer target: UDP datagrams from anywhere through the TUIO bridge's
// path: OSC decoding, TUIO frames, a source's tracker. May refuse, never crash;
// what decodes must encode and decode to the same packet.
import FuzzSupport
import TouchSyncTUIO

func fuzzOSC(_ input: UnsafeRawBufferPointer) {
    guard let packet = try? OSCDecoder.decode(Array(input)) else { return }
    let again = try? OSCDecoder.decode(OSCEncoder.encode(packet))
    // NaN floats decode to themselves bit for bit but never compare equal: compare the encodings.
    if again.map(OSCEncoder.encode) != OSCEncoder.encode(packet) { fatalError("OSC round trip changed the packet") }
    let (frames, _) = TUIOParser.frames(in: packet)
    var tracker = TUIOSourceTracker(width: 1920, height: 1080)
    for frame in frames { _ = tracker.apply(frame, arrival: 1) }
    _ = tracker.cancelAll()
}

runFuzzer(fuzzOSC)
