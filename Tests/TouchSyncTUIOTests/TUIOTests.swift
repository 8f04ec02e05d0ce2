import Testing
import TouchSyncCore
import TouchSyncTUIO

/// An OSC encoder written for the tests, apart from the module's, so the
/// decoder is checked against bytes it did not produce itself.
enum RawOSC {
    static func string(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8) + [0]
        return bytes + Array(repeating: 0, count: (4 - bytes.count % 4) % 4)
    }
    static func int(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
    static func float(_ value: Float) -> [UInt8] { withUnsafeBytes(of: value.bitPattern.bigEndian, Array.init) }
    enum Argument { case i(Int32), f(Float), s(String) }
    static func message(_ address: String, _ arguments: [Argument]) -> [UInt8] {
        var tags = ","
        var data: [UInt8] = []
        for argument in arguments {
            switch argument {
            case .i(let value): tags += "i"; data += int(value)
            case .f(let value): tags += "f"; data += float(value)
            case .s(let value): tags += "s"; data += string(value)
            }
        }
        return string(address) + string(tags) + data
    }
    static func bundle(_ elements: [[UInt8]], timeTag: UInt64 = 1) -> [UInt8] {
        var out = string("#bundle") + withUnsafeBytes(of: timeTag.bigEndian, Array.init)
        for element in elements { out += int(Int32(element.count)) + element }
        return out
    }
    /// A TUIO 1.1 cursor frame.
    static func cursors(source: String?, alive: [Int32], sets: [(Int32, Float, Float)], fseq: Int32) -> [UInt8] {
        var elements: [[UInt8]] = []
        if let source { elements.append(message("/tuio/2Dcur", [.s("source"), .s(source)])) }
        elements.append(message("/tuio/2Dcur", [.s("alive")] + alive.map { .i($0) }))
        for (id, x, y) in sets { elements.append(message("/tuio/2Dcur", [.s("set"), .i(id), .f(x), .f(y), .f(0), .f(0), .f(0)])) }
        elements.append(message("/tuio/2Dcur", [.s("fseq"), .i(fseq)]))
        return bundle(elements)
    }
}

@Suite("TUIO: OSC decoding and the cursor tracker")
struct TUIOTests {
    @Test func decodesEveryTypeTagAndRoundTrips() throws {
        let message = OSCMessage("/a/b", [.int32(-7), .float32(1.5), .string("hey"), .blob([1, 2, 3]), .int64(-1), .double(2.25),
            .timeTag(99), .bool(true), .bool(false), .null])
        let packet = OSCPacket.bundle(timeTag: 5, [.message(message), .bundle(timeTag: 6, [.message(OSCMessage("/x", []))])])
        #expect(try OSCDecoder.decode(OSCEncoder.encode(packet)) == packet)
        let raw = RawOSC.message("/tuio/2Dcur", [.s("set"), .i(3), .f(0.25), .f(0.75)])
        #expect(try OSCDecoder.decode(raw) == .message(OSCMessage("/tuio/2Dcur", [.string("set"), .int32(3), .float32(0.25), .float32(0.75)])))
    }

    @Test func refusesMalformedPacketsWithoutTrapping() {
        let good = RawOSC.cursors(source: "t", alive: [1, 2], sets: [(1, 0.1, 0.2)], fseq: 4)
        // Every truncation of a valid bundle, and a sweep of single-byte corruptions, throw or decode: never trap.
        // (Cut at an element boundary, a bundle is valid and shorter.)
        var refusedTruncations = 0
        for length in 0..<good.count {
            if let packet = try? OSCDecoder.decode(Array(good.prefix(length))) {
                #expect(packet.messages().count < 4)
            } else {
                refusedTruncations += 1
            }
        }
        #expect(refusedTruncations > good.count - 8)
        var decoded = 0
        for index in good.indices {
            for value: UInt8 in [0, 0x7F, 0xFF] {
                var corrupt = good
                corrupt[index] = value
                if (try? OSCDecoder.decode(corrupt)) != nil { decoded += 1 }
            }
        }
        #expect(decoded < good.count * 3)
        #expect(throws: OSCError.self) { try OSCDecoder.decode(RawOSC.string("/a") + RawOSC.string(",q")) }  // unknown tag
        #expect(throws: OSCError.self) { try OSCDecoder.decode(RawOSC.string("/a") + RawOSC.string(",b") + RawOSC.int(1_000_000)) }  // blob past the end
        var deep = RawOSC.message("/x", [])
        for _ in 0...OSCDecoder.maxDepth { deep = RawOSC.bundle([deep]) }
        #expect(throws: OSCError.self) { try OSCDecoder.decode(deep) }
    }

    @Test func trackerTurnsCursorsIntoTouches() throws {
        var tracker = TUIOSourceTracker(width: 1000, height: 500)
        func frame(_ bytes: [UInt8]) throws -> TUIOFrame {
            let (frames, problems) = TUIOParser.frames(in: try OSCDecoder.decode(bytes))
            #expect(problems == 0 && frames.count == 1)
            return frames[0]
        }
        // Cursor 1 appears with two sets (coalesced), cursor 2 appears without a position yet.
        let first = try frame(RawOSC.cursors(source: "table", alive: [1, 2], sets: [(1, 0.1, 0.2), (1, 0.2, 0.2)], fseq: 10))
        #expect(first.source == "table")
        let firstResult = tracker.apply(first, arrival: 100)
        let (began, alive) = try #require(firstResult)
        #expect(began.map(\.phase) == [.began] && began[0].samples.count == 2 && began[0].samples[0].flags.contains(.coalesced))
        #expect(began[0].samples[1].xInPoints == 200 && began[0].samples[1].yInPoints == 100)
        #expect(alive == [1])
        // A repeated and an older frame are dropped.
        let repeated = tracker.apply(first, arrival: 101)
        #expect(repeated == nil)
        let older = tracker.apply(try frame(RawOSC.cursors(source: nil, alive: [1], sets: [], fseq: 9)), arrival: 101)
        #expect(older == nil)
        // Cursor 2 gets its position: began; cursor 1 moves.
        let movedResult = tracker.apply(try frame(RawOSC.cursors(source: nil, alive: [1, 2], sets: [(1, 0.3, 0.2), (2, 0.5, 0.5)], fseq: 11)), arrival: 102)
        let (moved, _) = try #require(movedResult)
        #expect(moved.map(\.phase) == [.moved, .began])
        // Cursor 1's own packets lost, and it is gone from the alive set: it ends anyway.
        let endedResult = tracker.apply(try frame(RawOSC.cursors(source: nil, alive: [2], sets: [], fseq: 13)), arrival: 103)
        let (ended, after) = try #require(endedResult)
        #expect(ended == [TouchChange(touch: 1, phase: .ended)] && after == [2])
        // fseq -1: no ordering.
        let unordered = tracker.apply(try frame(RawOSC.cursors(source: nil, alive: [2], sets: [(2, 0.6, 0.5)], fseq: -1)), arrival: 104)
        #expect(unordered != nil)
        // The source goes quiet: what is down is cancelled.
        let cancelled = tracker.cancelAll()
        #expect(cancelled == [TouchChange(touch: 2, phase: .cancelled)])
        #expect(tracker.down.isEmpty)
    }

    /// One spoofed datagram naming a source with fseq + 2^30 - 10 made the
    /// tracker drop the next 240 honest frames, and two that agreed locked
    /// it out: a sequence far from the current one is taken only after 30
    /// frames in a row while the current one has been quiet for half a
    /// second; after a silence (`resynchronize`) any number is taken.
    @Test func aFarJumpIsTakenOnlyWhenSustainedAndTheCurrentSequenceIsQuiet() throws {
        var tracker = TUIOSourceTracker(width: 1000, height: 500)
        func frame(_ fseq: Int64) -> TUIOFrame {
            TUIOFrame(source: "table", sequence: fseq, timeTag: nil, alive: [1], updates: [.init(id: 1, x: 0.5, y: 0.5)])
        }
        #expect(tracker.apply(frame(100), arrival: 1) != nil)
        // Forged frames far ahead, 40 of them agreeing, interleaved with the honest tracker's: none is taken.
        var time = 1.0
        for step in Int64(1)...240 {
            time += 0.008
            if step <= 40 { #expect(tracker.apply(frame(100 + (1 << 29) + step), arrival: time) == nil, "forged frame \(step)") }
            #expect(tracker.apply(frame(100 + step), arrival: time) != nil, "honest frame \(100 + step)")
        }
        #expect(tracker.lastSequence == 340)
        // Far behind (as a wrap would look) is no shortcut either.
        #expect(tracker.apply(frame(340 - (1 << 31)), arrival: time) == nil)
        #expect(tracker.apply(frame(341), arrival: time) != nil)
        // A tracker that restarted at 50,000 and keeps sending while the old numbering stopped: taken after 30 frames.
        var taken: Int64? = nil
        for fseq in Int64(50_000)..<50_060 {
            time += 0.02
            if tracker.apply(frame(fseq), arrival: time) != nil, taken == nil { taken = fseq }
        }
        #expect(taken == 50_029, "the 30th frame of the new numbering, half a second after the last old one")
        #expect(tracker.lastSequence == 50_059)
        // A restarted tracker after a silence.
        tracker.resynchronize()
        #expect(tracker.apply(frame(1), arrival: time + 10) != nil)
        #expect(tracker.apply(frame(2), arrival: time + 10) != nil)
    }

    /// One source cannot hold more than its cursor limit down: the rest begin nothing.
    @Test func aSourceHoldsAtMostItsCursorLimit() throws {
        var tracker = TUIOSourceTracker(width: 1000, height: 500, maxCursors: 3)
        let updates = (1...10).map { TUIOFrame.Cursor(id: Int32($0), x: 0.1, y: 0.1) }
        let first = tracker.apply(TUIOFrame(sequence: 1, alive: Array(1...10), updates: updates), arrival: 1)
        let (changes, alive) = try #require(first)
        #expect(changes.count == 3 && alive.count == 3 && tracker.ignoredCursors == 7)
        // One lifts: another may begin.
        let second = tracker.apply(TUIOFrame(sequence: 2, alive: [2, 3, 4], updates: [.init(id: 4, x: 0.2, y: 0.2)]), arrival: 2)
        let next = try #require(second)
        #expect(next.changes.map(\.phase) == [.began, .ended] && tracker.down == [2, 3, 4])
    }

    @Test func readsTUIO2Pointers() throws {
        let bytes = RawOSC.bundle([
            RawOSC.message("/tuio2/frm", [.i(7)]),
            RawOSC.message("/tuio2/ptr", [.i(4), .i(0), .i(0), .f(0.5), .f(0.5), .f(0.3), .f(0), .f(1), .f(0.8)]),
            RawOSC.message("/tuio2/alv", [.i(4)]),
        ])
        let (frames, problems) = TUIOParser.frames(in: try OSCDecoder.decode(bytes))
        #expect(problems == 0)
        #expect(frames == [TUIOFrame(sequence: 7, alive: [4], updates: [.init(id: 4, x: 0.5, y: 0.5, pressure: 0.8, angle: 0.3)])])
        var tracker = TUIOSourceTracker(width: 100, height: 100)
        let result = tracker.apply(frames[0], arrival: 1)
        let (changes, _) = try #require(result)
        #expect(changes.first?.samples.first?.flags.contains(.hasForce) == true)
    }

    @Test func emitterBundlesDecodeToTheBoardsTouches() throws {
        var board = BoardState()
        var diffs: [StrokeDiff] = []
        try board.reduce(
            TouchFrame(changes: [TouchChange(touch: 9, phase: .began, samples: [try Sample(x: 480, y: 270, timestamp: 1)])]),
            from: UserNamespace("ann"), style: .default, into: &diffs)
        let bytes = TUIOEmitter.bundle(of: board, width: 1920, height: 1080, source: "touchsync@b", frame: 3)
        let (frames, problems) = TUIOParser.frames(in: try OSCDecoder.decode(bytes))
        #expect(problems == 0)
        #expect(frames == [TUIOFrame(source: "touchsync@b", sequence: 3, alive: [1], updates: [.init(id: 1, x: 0.25, y: 0.25)])])
    }
}
