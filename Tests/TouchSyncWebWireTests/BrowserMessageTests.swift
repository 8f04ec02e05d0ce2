import TestSupport
import Foundation
import Testing
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWebWire

/// The browser wire's one message type: every kind survives encoding and
/// decoding, and a board kept from `BrowserWire`'s batches is the board.
@Suite("Browser messages")
struct BrowserMessageTests {
    static let everyKind: [BrowserMessage] = [
        .hello(.init(board: "b-1", resume: nil, name: "Ann", token: "t0k3n")),
        .touch(.init(n: 3, phase: "moved", id: 9, s: [[1.5, 2, 1000.25, 0.5, nil, nil], [2, 3, 1016]], p: [[3, 4, 1030]])),
        .style(n: 1, rgba: 0xFF00_00FF, width: 2.5),
        .undo(n: 4), .redo(n: 5), .erase(n: 6, strokes: [1, 2]), .clear(n: 7, scope: "mine"),
        .edit(.init(n: 8, strokes: [3, 1], op: "move", dx: 12.5, dy: -3, scale: 1.5, ox: 100, oy: 200)),
        .edit(.init(n: 9, strokes: [2], op: "recolour", rgba: 0x43A0_47FF)),
        .ping(at: 17.5), .resync, .name("Émile \"the\" artist"), .bye,
        .welcome(.init(user: "web:abc", resume: "r", board: "b-1", acked: 12, role: "draw", name: "Ann")),
        .welcome(.init(user: nil, resume: nil, board: "b-1", acked: 0, role: "watch", name: nil)),
        .ack(n: 12), .refused(n: 3, code: "INVALID_SAMPLE", message: "force is 0 to 1"),
        .error(code: "UNKNOWN_TOUCH", message: "no such touch", fromHub: true), .error(code: "MALFORMED", message: "not JSON", fromHub: false),
        .hub(.busy(retryAfterMilliseconds: 250)), .hub(.unreachable), .hub(.connected),
        .users([.init(user: "web:abc", name: "Ann", rgba: 0x1565_C0FF), .init(user: "web:def", name: "guest", rgba: nil)]),
        .snapshot(.init(seq: 4, accepted: [.init(id: 1, owner: "web:abc", touch: 2, rgba: 255, w: 128, pos: 0, s: [64, 64, 1000, 0], p: [])], active: [])),
        .batch(.init(seq: 5, diffs: [.began(id: 2, owner: "web:abc", touch: 3, rgba: 255, width: 64), .appended(id: 2, offset: 0, samples: [1, 2, 3, 0]), .cleared(owner: nil)])),
        .pong(at: 17.5),
    ]

    @Test(arguments: everyKind) func everyKindRoundTrips(_ message: BrowserMessage) throws {
        let text = message.json
        #expect(try BrowserMessage.decode(text) == message, "\(text)")
        if case .batch = message { #expect(text.hasPrefix(#"["b","#)) } else { #expect(text.contains(#""t":"\#(message.kind)""#)) }
    }

    /// A user without a colour is listed with `rgba` null, not without the key (docs/protocol.md).
    @Test func aUserWithoutColourHasRgbaNull() {
        let text = BrowserMessage.users([.init(user: "web:a", name: "Ann", rgba: nil), .init(user: "web:b", name: "Ben", rgba: 255)]).json
        #expect(text.contains(#""rgba":null"#), "\(text)")
        #expect(text.components(separatedBy: "\"rgba\"").count == 3, "\(text)")
    }

    /// Samples that are not numbers refuse the touch by its number (taken), not as a connection error.
    @Test func samplesThatAreNotNumbersAreRefusedByNumber() {
        for text in [
            #"{"t":"touch","n":7,"phase":"moved","id":1,"s":[["1",2,3]]}"#, #"{"t":"touch","n":7,"phase":"moved","id":1,"s":[[1,2,false]]}"#,
            #"{"t":"touch","n":7,"phase":"moved","id":1,"s":[[1,2,3]],"p":[[{},2,3]]}"#, #"{"t":"touch","n":7,"phase":"moved","id":1,"s":"x"}"#,
        ] {
            do {
                _ = try BrowserMessage.decode(text)
                Issue.record("decoded: \(text)")
            } catch let refused as BrowserMessage.RefusedByNumber {
                #expect(refused.number == 7 && refused.code == "MALFORMED", "\(text)")
            } catch {
                Issue.record("not refused by number: \(text): \(error)")
            }
        }
    }

    @Test func malformedMessagesSayWhy() {
        func refusal(_ text: String) -> String? {
            do {
                _ = try BrowserMessage.decode(text)
                return nil
            } catch let error as BrowserWireError {
                return error.code + ": " + error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal("{nope")?.hasPrefix("MALFORMED") == true)
        #expect(refusal(#"{"n":1}"#)?.contains("t names its kind") == true)
        #expect(refusal(#"{"t":"undo"}"#)?.contains("undo needs its number n") == true)
        #expect(refusal(#"{"t":"touch","n":"one"}"#)?.contains("n is not") == true)
        #expect(refusal(#"{"t":"whatever"}"#)?.contains("unknown message type whatever") == true)
        #expect(throws: BrowserMessage.RefusedByNumber.self) { try BrowserMessage.decode(#"{"t":"whatever","n":4}"#) }
    }

    /// The gateway's one-pass touch reader gives what JSONDecoder gives, or
    /// leaves the message to it: generated touch messages (numbers of every
    /// form, nulls, spacing, key orders, absent keys) and odd ones.
    @Test func theOnePassTouchReaderAgreesWithJSONDecoder() throws {
        var random = SplitMix64(seed: 24)
        func slow(_ text: String) -> BrowserMessage? { try? JSONDecoder().decode(BrowserMessage.self, from: Data(text.utf8)) }
        func number() -> String {
            switch random.next() % 6 {
            case 0: return "null"
            case 1: return String(random.next() % 5000)
            case 2: return "-" + String(random.next() % 300) + "." + String(random.next() % 1000)
            case 3: return String(Double(random.next() % 1_000_000) / 997)
            case 4: return String(random.next() % 9 + 1) + "e" + ["", "+", "-"][Int(random.next() % 3)] + String(random.next() % 20)
            default: return "0." + String(random.next() % 100_000)
            }
        }
        func rows() -> String {
            if random.next() % 10 == 0 { return "null" }
            let rows = (0..<Int(random.next() % 4)).map { _ in "[" + (0..<Int(random.next() % 7)).map { _ in number() }.joined(separator: ",") + "]" }
            return "[" + rows.joined(separator: random.next() % 2 == 0 ? "," : " , ") + "]"
        }
        var read = 0
        for _ in 0..<2000 {
            var fields = [#""t":"touch""#, #""n":\#(random.next() % 100_000)"#]
            if random.next() % 8 != 0 { fields.append(#""phase":\#(["\"moved\"", "\"began\"", "null", "\"ended\""][Int(random.next() % 4)])"#) }
            if random.next() % 8 != 0 { fields.append(#""id":\#(random.next() % 2 == 0 ? "null" : String(random.next() % 50))"#) }
            if random.next() % 4 != 0 { fields.append(#""s":"# + rows()) }
            if random.next() % 3 == 0 { fields.append(#""p":"# + rows()) }
            fields.shuffle(using: &random)
            let space = random.next() % 3 == 0 ? " " : ""
            let text = "{" + space + fields.joined(separator: space + "," + space) + space + "}"
            let fast = TouchMessageReader.read(text)
            if let fast {
                read += 1
                #expect(slow(text) == .touch(fast), "\(text)")
            }
        }
        #expect(read > 1900, "the common shapes take the fast path (\(read) of 2000)")
        // Odd inputs are left to JSONDecoder (nil here), whatever it makes of them.
        for odd in [
            #"{"t":"touch","n":1,"n":2}"#, #"{"t":"touch","n":01}"#, #"{"t":"touch","n":1.0}"#, #"{"t":"touch","n":-1}"#,
            #"{"t":"touch","n":1,"phase":"mo\u0076ed"}"#, #"{"t":"touch","n":1,"x":2}"#, #"{"t":"touch","n":1,"s":[[1,]]}"#,
            #"{"t":"touch","n":1,"s":[[.5]]}"#, #"{"t":"touch","n":1} x"#, #"{"t":"undo","n":1}"#, #"["b",1,[]]"#,
            #"{"t":"touch","n":18446744073709551616}"#, #"{"t":"touch","n":1,"s":[[1e999]]}"#, #"{"t":"touch"}"#, "",
        ] {
            #expect(TouchMessageReader.read(odd) == nil, "\(odd)")
        }
    }

    /// A simulated session (users, fingers, coalesced, predicted and amended
    /// samples, cancels, clears, undo, redo, erase) encoded by BrowserWire and
    /// applied to a BrowserReplica, from the start and from a snapshot half-way,
    /// gives every stroke with exactly the board's samples.
    @Test func aReplicaFromTheWireIsTheBoard() throws {
        var profile = SimulationProfile()
        profile.users = 3
        profile.clearRate = 0.002
        profile.boardClears = false
        var simulator = SessionSimulator(seed: 31, profile: profile)
        var fromStart = BrowserReplica()
        try fromStart.apply(try Self.snapshot(BrowserWire.snapshot(BoardState())))
        var fromMiddle: BrowserReplica? = nil
        var fromAfter = fromStart
        var (sameText, batches) = (0, 0)
        let board = try SimulatedBoardSession.run(&simulator, steps: 1200) { step, before, sealed, board in
            batches += 1
            let text = BrowserWire.batch(sealed, before: before)
            // Encoded from the board after the batch: the same text but for strokes gone by its end, the same board.
            let afterText = BrowserWire.batch(sealed, after: board)
            if afterText == text { sameText += 1 }
            guard case .batch(let afterBatch) = try BrowserMessage.decode(afterText) else { Issue.record("not a batch: \(afterText)"); return }
            #expect(try fromAfter.apply(afterBatch) == .applied)
            guard case .batch(let batch) = try BrowserMessage.decode(text) else { Issue.record("not a batch: \(text)"); return }
            #expect(try fromStart.apply(batch) == .applied)
            if var middle = fromMiddle { #expect(try middle.apply(batch) == .applied); fromMiddle = middle }
            if step == 600 {
                var middle = BrowserReplica()
                try middle.apply(try Self.snapshot(BrowserWire.snapshot(board)))
                #expect(try middle.apply(batch) == .skipped, "a batch the snapshot already has is skipped")
                fromMiddle = middle
            }
        }
        #expect(board.acceptedStrokes.count > 10)
        let expected = (board.acceptedStrokes + board.orderedActiveStrokes).map { stroke in
            stroke.samples.map { BrowserSample(x: Int64($0.x), y: Int64($0.y), t: $0.time, force: $0.flags.contains(.hasForce) ? Int64($0.force) : 0) }
        }
        #expect(fromStart.strokes.map(\.samples) == expected)
        #expect(try #require(fromMiddle).strokes.map(\.samples) == expected)
        #expect(fromAfter.strokes == fromStart.strokes)
        #expect(sameText > batches * 9 / 10, "\(sameText) of \(batches) batches")
        #expect(fromStart.strokes.map(\.owner) == (board.acceptedStrokes + board.orderedActiveStrokes).map(\.owner.rawValue))
        var gap = fromStart
        #expect(try gap.apply(BrowserBatch(seq: board.sequence + 2, diffs: [])) == .gap)
    }

    static func snapshot(_ text: String) throws -> BrowserSnapshot {
        guard case .snapshot(let snapshot) = try BrowserMessage.decode(text) else { throw TestFailure("not a snapshot: \(text)") }
        return snapshot
    }
}
