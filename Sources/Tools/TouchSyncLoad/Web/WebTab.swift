import Foundation
import NIOCore
import Synchronization
import TouchSyncCore
import TouchSyncSimulation
import TouchSyncWebWire

/// One simulated browser tab speaking the browser wire as the page does: a
/// hello (with its resume token after a reconnect), numbered messages kept
/// until the gateway acknowledges them and resent after a reconnect, one
/// `touch` message per pointer event with its coalesced and predicted
/// samples, and the board's snapshot and batches applied in order (a gap
/// asks for `resync`). A measuring tab keeps the whole board as the page
/// does and records each sample's latency; the others follow the sequence
/// only, as cheaply as a real page's network layer.
final class WebTab: Sendable {
    let index: Int
    let board: String
    let measuring: Bool
    /// The wire its hello asks for: "packed2" (the page's default), "packed", "binary" or "json".
    let wire: String
    private let latency: LatencyRecorder?

    /// A message as it goes out: JSON text, or a binary touch.
    enum Outgoing: Sendable {
        case text(String)
        case binary([UInt8])
    }

    /// Touches are encoded and sent under this lock, in number order on each
    /// connection: chained frames are read against the ones before them.
    private struct Sender {
        var connection: WebSocketConnection? = nil
        var chains = TouchChains()
    }
    private let sender = Mutex(Sender())

    struct State {
        var connection: WebSocketConnection? = nil
        var user: String? = nil
        var resume: String? = nil
        var welcomed = false
        /// The wire the last welcome named.
        var spoken = "json"
        /// The page's numbers: the last one used, and the messages the gateway has not acknowledged yet.
        var number: UInt64 = 0
        var pending: [(number: UInt64, touch: BrowserMessage.Touch)] = []
        var ackedThrough: UInt64 = 0
        var sequence: UInt64? = nil
        var awaitingSnapshot = true
        var replica = BrowserReplica()
        var simulator: SessionSimulator
        var drawn = DrawnStrokes()
        var samplesSent = 0
        var messagesSent = 0
        var gaps = 0
        var snapshots = 0
        var reconnects = 0
        var sessionsLost = 0
        var busyNotices = 0
        var refusals: [String: Int] = [:]
        var errors: [String: Int] = [:]
        var malformed = 0
        var drawing = false
        var closing = false
        /// Whether the connection dropped while the run still wanted it (a reconnect follows).
        var dropped = false
        var bytesReceived = 0
        var bytesSent = 0
        var worstLateness: Int64 = 0
        var ticksRun = 0
    }
    let state: Mutex<State>
    /// Wakes the run's waits (welcome, acknowledgements, sequence) without polling.
    private let changed: @Sendable () -> Void

    init(
        index: Int, board: String, measuring: Bool, wire: String = "packed2", simulator: SessionSimulator, latency: LatencyRecorder?,
        changed: @escaping @Sendable () -> Void
    ) {
        self.index = index
        self.board = board
        self.measuring = measuring
        self.wire = wire
        self.latency = latency
        self.changed = changed
        self.state = Mutex(State(simulator: simulator))
    }

    // MARK: Connection

    /// Connects (again) and says hello, with the resume token after a reconnect.
    func connect(host: String, port: Int, group: any EventLoopGroup) async throws {
        let connection = try await WebSocketConnection.connect(
            host: host, port: port, group: group,
            onText: { [self] text in receive(text) },
            onBinary: { [self] bytes in receive(binary: bytes) },
            onClose: { [self] in connectionEnded() })
        let resume = state.withLock { state in
            state.connection = connection
            state.welcomed = false
            return state.resume
        }
        connection.send(BrowserMessage.hello(.init(board: board, resume: resume, name: "load \(index)", wire: wire == "json" ? nil : wire)).json)
    }

    private func connectionEnded() {
        state.withLock { state in
            if let connection = state.connection {
                state.bytesReceived += connection.bytesReceived
                state.bytesSent += connection.bytesSent
            }
            state.connection = nil
            state.welcomed = false
            if !state.closing { state.dropped = true }
        }
        changed()
    }

    /// Says goodbye and closes.
    func close() async {
        let connection = state.withLock { state in
            state.closing = true
            return state.connection
        }
        guard let connection else { return }
        connection.send(BrowserMessage.bye.json)
        await connection.close()
    }

    var isWelcomed: Bool { state.withLock { $0.welcomed } }
    /// The wire the last welcome named.
    var spoken: String { state.withLock { $0.spoken } }
    var needsReconnect: Bool { state.withLock { $0.dropped && !$0.closing } }

    /// Bytes of text both ways, over every connection so far.
    var bytes: (received: Int, sent: Int) {
        state.withLock { state in
            (state.bytesReceived + (state.connection?.bytesReceived ?? 0), state.bytesSent + (state.connection?.bytesSent ?? 0))
        }
    }

    // MARK: Drawing

    /// One input event: every finger that changed sends its `touch` message,
    /// its samples stamped `time` (when the input happened, µs on the run's
    /// monotonic clock). `lateness`: how far behind its schedule this tick runs (µs).
    func tick(at time: Int64, lateness: Int64) {
        let (connection, spoken, touches) = state.withLock { state -> (WebSocketConnection?, String, [BrowserMessage.Touch]) in
            guard state.drawing else { return (nil, "", []) }
            state.ticksRun += 1
            state.worstLateness = max(state.worstLateness, lateness)
            let frame = state.simulator.nextFrame(for: 0, at: time)
            guard !frame.changes.isEmpty else { return (nil, "", []) }
            var touches: [BrowserMessage.Touch] = []
            for change in frame.changes {
                state.number += 1
                let touch = Self.touchMessage(change, number: state.number)
                state.pending.append((state.number, touch))
                state.samplesSent += change.samples.count
                state.messagesSent += 1
                touches.append(touch)
            }
            state.drawn.record(Self.asSent(frame))
            return (state.welcomed ? state.connection : nil, state.spoken, touches)
        }
        if let connection { send(touches, on: connection, wire: spoken) }
    }

    /// Stops drawing; every finger still down lifts.
    func stopDrawing() {
        let (connection, spoken, touches) = state.withLock { state -> (WebSocketConnection?, String, [BrowserMessage.Touch]) in
            state.drawing = false
            let lift = TouchFrame(changes: state.drawn.liveTouches.map { TouchChange(touch: $0, phase: .ended) })
            var touches: [BrowserMessage.Touch] = []
            for change in lift.changes {
                state.number += 1
                let touch = Self.touchMessage(change, number: state.number)
                state.pending.append((state.number, touch))
                state.messagesSent += 1
                touches.append(touch)
            }
            state.drawn.record(lift)
            return (state.welcomed ? state.connection : nil, state.spoken, touches)
        }
        if let connection { send(touches, on: connection, wire: spoken) }
    }

    func startDrawing() { state.withLock { $0.drawing = true } }

    /// A `touch` message as the page builds it: samples as `[x, y, t]` in CSS
    /// pixels and milliseconds (the simulator's fixed point divided back, so
    /// the gateway's rounding returns it exactly).
    static func touchMessage(_ change: TouchChange, number: UInt64) -> BrowserMessage.Touch {
        func list(_ samples: [Sample]) -> [[Double?]] {
            samples.map { [Double($0.x) / 64, Double($0.y) / 64, Double($0.time) / 1000] }
        }
        return BrowserMessage.Touch(
            n: number, phase: "\(change.phase)", id: change.touch, s: change.samples.isEmpty ? nil : list(change.samples),
            p: change.predicted.isEmpty || change.phase == .ended ? nil : list(change.predicted))
    }

    /// A touch in the wire the welcome named: a chained frame on the packed
    /// wires (advancing `chains`), a standalone binary frame, or JSON text.
    static func encode(_ touch: BrowserMessage.Touch, wire: String, chains: inout TouchChains) -> Outgoing {
        switch wire {
        case "packed", "packed2": if let bytes = try? PackedTouch.encode(touch, chains: &chains) { return .binary(bytes) }
        case "binary": if let bytes = try? BrowserBinary.encode(touch) { return .binary(bytes) }
        default: break
        }
        return .text(BrowserMessage.touch(touch).json)
    }

    /// Sends touches in order; a new connection starts a fresh chain.
    private func send(_ touches: [BrowserMessage.Touch], on connection: WebSocketConnection, wire: String) {
        sender.withLock { sender in
            if sender.connection !== connection {
                sender.connection = connection
                sender.chains = TouchChains()
            }
            for touch in touches {
                switch Self.encode(touch, wire: wire, chains: &sender.chains) {
                case .text(let text): connection.send(text)
                case .binary(let bytes): connection.send(bytes: bytes)
                }
            }
        }
    }

    /// The frame as the gateway turns the page's numbers back into samples:
    /// position and time only (the page sends no force or angles here).
    static func asSent(_ frame: TouchFrame) -> TouchFrame {
        var frame = frame
        for index in frame.changes.indices {
            frame.changes[index].samples = frame.changes[index].samples.map { Sample(x: $0.x, y: $0.y, time: $0.time) }
            frame.changes[index].amendments = []
        }
        return frame
    }

    // MARK: Receiving

    private static let ackPrefix = Array(#"{"t":"ack","n":"#.utf8)
    private static let batchPrefix = Array(#"["b","#.utf8)

    private func receive(_ text: String) {
        // The two messages that come with every pointer event are read without a JSON decoder.
        var utf8 = text
        let fast: (ack: UInt64?, batch: UInt64?) = utf8.withUTF8 { bytes in
            if bytes.starts(with: Self.ackPrefix) { return (Self.integer(in: bytes, from: Self.ackPrefix.count), nil) }
            if bytes.starts(with: Self.batchPrefix) { return (nil, Self.integer(in: bytes, from: Self.batchPrefix.count)) }
            return (nil, nil)
        }
        if let ack = fast.ack { return acknowledge(through: ack) }
        if let sequence = fast.batch { return applyBatch(sequence: sequence, text: text) }
        let message: BrowserMessage
        do { message = try BrowserMessage.decode(text) } catch {
            state.withLock { $0.malformed += 1 }
            return
        }
        switch message {
        case .welcome(let welcome):
            let (connection, spoken, resend) = state.withLock { state -> (WebSocketConnection?, String, [BrowserMessage.Touch]) in
                if state.resume != nil && state.resume != welcome.resume {
                    // A new session: the gateway lost ours (it restarted, or we came back too late).
                    state.sessionsLost += 1
                }
                state.user = welcome.user
                state.resume = welcome.resume
                state.welcomed = true
                state.spoken = welcome.wire
                acknowledge(through: welcome.acked, in: &state)
                return (state.connection, state.spoken, state.pending.map(\.touch))
            }
            if let connection { send(resend, on: connection, wire: spoken) }
            changed()
        case .ack(let number):
            acknowledge(through: number)
        case .refused(let number, let code, _):
            state.withLock { state in
                state.refusals[code, default: 0] += 1
                // Except OUT_OF_ORDER the number is used: done once the messages before it are.
                if code != "OUT_OF_ORDER" { state.pending.removeAll { $0.number == number } }
            }
        case .error(let code, _, _):
            state.withLock { $0.errors[code, default: 0] += 1 }
            changed()  // a refused hello is news too: the run stops waiting for it
        case .hub(.busy):
            state.withLock { $0.busyNotices += 1 }
        case .snapshot(let snapshot):
            state.withLock { state in
                state.snapshots += 1
                state.sequence = snapshot.seq
                state.awaitingSnapshot = false
                if measuring {
                    do { try state.replica.apply(snapshot) } catch { state.malformed += 1 }
                }
            }
            changed()
        case .batch(let batch):
            // Not the gateway's usual encoding (another key order): same rules.
            applyBatch(sequence: batch.seq, text: text)
        default:
            break
        }
    }

    /// A binary frame from the gateway: a batch or an ack.
    private func receive(binary bytes: [UInt8]) {
        guard let frames = try? BrowserBinary.framesFromGateway(bytes) else {
            state.withLock { $0.malformed += 1 }
            return
        }
        for frame in frames {
            if frame.first == PackedBatch.kind {
                guard let sequence = PackedBatch.sequence(of: frame) else {
                    state.withLock { $0.malformed += 1 }
                    continue
                }
                applyBatch(sequence: sequence, packed: frame)
                continue
            }
            switch try? BrowserBinary.decodeFromGateway(frame) {
            case .ack(let number)?: acknowledge(through: number)
            case .batch(let batch)?: applyBatch(sequence: batch.seq, decoded: batch)
            default: state.withLock { $0.malformed += 1 }
            }
        }
    }

    private func applyBatch(sequence: UInt64, text: String? = nil, decoded: BrowserBatch? = nil, packed: [UInt8]? = nil) {
        let resync: WebSocketConnection? = state.withLock { state in
            guard !state.awaitingSnapshot, let current = state.sequence, sequence > current else { return nil }
            guard sequence == current + 1 else {
                state.gaps += 1
                state.awaitingSnapshot = true
                return state.connection
            }
            state.sequence = sequence
            if measuring {
                let batch: BrowserBatch
                if let decoded {
                    batch = decoded
                } else if let packed, let read = try? PackedBatch.decode(packed, replica: state.replica, blocks: state.spoken == "packed2" ? .packed2 : .packed) {
                    batch = read
                } else if let text, case .batch(let fromText)? = try? BrowserMessage.decode(text) {
                    batch = fromText
                } else {
                    state.malformed += 1
                    return nil
                }
                record(batch, replica: state.replica)
                do { _ = try state.replica.apply(batch) } catch { state.malformed += 1 }
            }
            return nil
        }
        resync?.send(BrowserMessage.resync.json)
        changed()
    }

    /// Latency of each appended sample: now against its time (the run's monotonic clock).
    private func record(_ batch: BrowserBatch, replica: BrowserReplica) {
        guard let latency else { return }
        let now = monotonicMicroseconds()
        latency.record(latencies: Self.appendedSampleTimes(of: batch, after: replica).map { now - $0 })
    }

    /// The times of the samples `batch` appends, in order. A stroke's appends
    /// are delta-coded from its last sample, which an earlier append of the
    /// same batch may have moved (a hub publishing at an interval puts several
    /// of a stroke's appends in one batch); an append that cannot be read adds none.
    static func appendedSampleTimes(of batch: BrowserBatch, after replica: BrowserReplica) -> [Int64] {
        var times: [Int64] = []
        var lastOfBatch: [UInt64: BrowserSample] = [:]
        for diff in batch.diffs {
            guard case .appended(let id, let offset, let list) = diff else { continue }
            let base = offset > 0 ? lastOfBatch[id] ?? replica.active[id]?.samples.last : nil
            guard let samples = try? BrowserSample.decode(list, from: base) else { continue }
            if let last = samples.last { lastOfBatch[id] = last }
            times += samples.map(\.t)
        }
        return times
    }

    private func acknowledge(through number: UInt64) {
        state.withLock { acknowledge(through: number, in: &$0) }
        changed()
    }

    private func acknowledge(through number: UInt64, in state: inout State) {
        guard number > state.ackedThrough else { return }
        state.ackedThrough = number
        let done = state.pending.prefix { $0.number <= number }.count
        state.pending.removeFirst(done)
    }

    /// A decimal integer at `offset`.
    private static func integer(in bytes: UnsafeBufferPointer<UInt8>, from offset: Int) -> UInt64? {
        var value: UInt64 = 0
        var index = offset
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
            value = value &* 10 &+ UInt64(bytes[index] - 48)
            index += 1
        }
        return index > offset ? value : nil
    }

    // MARK: Checks

    var allAcknowledged: Bool { state.withLock { $0.pending.isEmpty } }
    var sequence: UInt64? { state.withLock { $0.awaitingSnapshot ? nil : $0.sequence } }
}
