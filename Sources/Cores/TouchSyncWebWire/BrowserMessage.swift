import Foundation
import TouchSyncCore

/// Every message of the browser wire, both directions (docs/protocol.md, "The
/// browser wire"): the gateway decodes what tabs send and encodes what it
/// sends them with this one type, and so do clients that are not the page
/// (`touchsync load --web`, the gateway's tests). JSON text frames: an object
/// whose `t` names its kind, except a batch, which is an array.
///
/// The gateway encodes snapshots and batches with `BrowserWire` (the board's
/// fixed point, delta-coded, once per batch for every tab); they decode here.
public enum BrowserMessage: Sendable, Equatable {
    // Tab to gateway.
    case hello(Hello)
    case touch(Touch)
    case style(n: UInt64, rgba: UInt32?, width: Double?)
    case undo(n: UInt64)
    case redo(n: UInt64)
    case erase(n: UInt64, strokes: [UInt64]?)
    case edit(Edit)
    case clear(n: UInt64, scope: String?)
    case ping(at: Double)
    case resync
    case name(String?)
    case bye
    /// Where the tab's pointer is on the board (points), or nil: it left the
    /// board; `laser` while it draws with the laser pointer, `view` the board
    /// rectangle it shows (for followers). Ephemeral: never numbered, acknowledged or stored.
    case cursor(Cursor)
    // Gateway to tab.
    case welcome(Welcome)
    case ack(n: UInt64)
    case refused(n: UInt64, code: String, message: String)
    case error(code: String, message: String, fromHub: Bool)
    case hub(HubState)
    case users([TabUser])
    case snapshot(BrowserSnapshot)
    case batch(BrowserBatch)
    case pong(at: Double)
    case presence(Presence)

    public struct Cursor: Sendable, Equatable {
        public var x: Double?
        public var y: Double?
        public var laser: Bool
        /// [minX, minY, maxX, maxY] in board points.
        public var view: [Double]?
        public init(x: Double?, y: Double?, laser: Bool = false, view: [Double]? = nil) {
            self.x = x
            self.y = y
            self.laser = laser
            self.view = view
        }
    }

    /// Another tab's pointer on the board (docs/protocol.md, "Presence"): `x` and `y` nil when it left.
    public struct Presence: Sendable, Equatable, Codable {
        /// The tab's number at this gateway (a tab of one user's several tabs).
        public var id: UInt64
        public var user: String?
        public var name: String?
        public var rgba: UInt32?
        public var x: Double?
        public var y: Double?
        public var laser: Bool?
        public var view: [Double]?
        public init(id: UInt64, user: String?, name: String?, rgba: UInt32?, x: Double?, y: Double?, laser: Bool? = nil, view: [Double]? = nil) {
            self.id = id
            self.user = user
            self.name = name
            self.rgba = rgba
            self.x = x
            self.y = y
            self.laser = laser
            self.view = view
        }
    }

    /// An edit of accepted strokes (docs/protocol.md, "The browser wire"):
    /// `op` is `move` (by `dx`, `dy` and `scale` about `ox`, `oy`, in board
    /// points), `recolour` (to `rgba`), `delete` or `duplicate` (copies, moved
    /// as for `move`). Fields stay optional so that a bad edit is refused by number.
    public struct Edit: Sendable, Equatable {
        public var n: UInt64
        public var strokes: [UInt64]?
        public var op: String?
        public var dx: Double?
        public var dy: Double?
        public var scale: Double?
        public var ox: Double?
        public var oy: Double?
        public var rgba: UInt32?
        public init(
            n: UInt64, strokes: [UInt64]?, op: String?, dx: Double? = nil, dy: Double? = nil, scale: Double? = nil, ox: Double? = nil,
            oy: Double? = nil, rgba: UInt32? = nil
        ) {
            self.n = n
            self.strokes = strokes
            self.op = op
            self.dx = dx
            self.dy = dy
            self.scale = scale
            self.ox = ox
            self.oy = oy
            self.rgba = rgba
        }
    }

    public struct Hello: Sendable, Equatable, Codable {
        public var board: String?
        public var resume: String?
        public var name: String?
        public var token: String?
        /// `"binary"` asks for binary frames (docs/protocol.md, "Binary frames"); absent or anything else: JSON only.
        public var wire: String?
        public init(board: String?, resume: String? = nil, name: String? = nil, token: String? = nil, wire: String? = nil) {
            self.board = board
            self.resume = resume
            self.name = name
            self.token = token
            self.wire = wire
        }
    }

    /// One pointer event: its coalesced samples (`s`) and predicted ones (`p`),
    /// each `[x, y, t, force, azimuth, altitude]` in CSS pixels, milliseconds,
    /// 0…1 and radians, trailing ones null or absent. Phase and id stay
    /// optional so that a numbered message missing them is refused by number.
    public struct Touch: Sendable, Equatable {
        public var n: UInt64
        public var phase: String?
        public var id: UInt64?
        public var s: [[Double?]]?
        public var p: [[Double?]]?
        public init(n: UInt64, phase: String?, id: UInt64?, s: [[Double?]]? = nil, p: [[Double?]]? = nil) {
            self.n = n
            self.phase = phase
            self.id = id
            self.s = s
            self.p = p
        }
    }

    public struct Welcome: Sendable, Equatable, Codable {
        /// The tab's namespace (null for a watcher).
        public var user: String?
        public var resume: String?
        public var board: String
        public var acked: UInt64
        public var role: String
        public var name: String?
        /// `"binary"` when the gateway speaks binary frames on this connection (the hello asked); else `"json"`.
        public var wire: String
        public init(user: String?, resume: String?, board: String, acked: UInt64, role: String, name: String?, wire: String = "json") {
            self.user = user
            self.resume = resume
            self.board = board
            self.acked = acked
            self.role = role
            self.name = name
            self.wire = wire
        }
    }

    public enum HubState: Sendable, Equatable {
        case busy(retryAfterMilliseconds: Int64)
        case unreachable
        case connected
    }

    public struct TabUser: Sendable, Equatable, Codable {
        public var user: String
        public var name: String
        public var rgba: UInt32?
        public init(user: String, name: String, rgba: UInt32?) {
            self.user = user
            self.name = name
            self.rgba = rgba
        }

        private enum Key: String, CodingKey { case user, name, rgba }

        /// `rgba` is always present: null for a tab that has not chosen a colour (docs/protocol.md).
        public func encode(to encoder: any Encoder) throws {
            var object = encoder.container(keyedBy: Key.self)
            try object.encode(user, forKey: .user)
            try object.encode(name, forKey: .name)
            try object.encode(rgba, forKey: .rgba)
        }
    }

    /// The most samples a touch message may carry in `s`, and in `p` (docs/protocol.md, "The browser wire").
    public static let maxSamplesPerList = 1024

    /// The number of a numbered message (touch, style, undo, redo, erase, edit, clear).
    public var number: UInt64? {
        switch self {
        case .touch(let touch): touch.n
        case .style(let n, _, _), .undo(let n), .redo(let n), .erase(let n, _), .clear(let n, _): n
        case .edit(let edit): edit.n
        default: nil
        }
    }

    /// The `t` of an object message (`b` for a batch).
    public var kind: String {
        switch self {
        case .hello: "hello"
        case .touch: "touch"
        case .style: "style"
        case .undo: "undo"
        case .redo: "redo"
        case .erase: "erase"
        case .edit: "edit"
        case .clear: "clear"
        case .ping: "ping"
        case .resync: "resync"
        case .name: "name"
        case .bye: "bye"
        case .cursor: "cursor"
        case .presence: "presence"
        case .welcome: "welcome"
        case .ack: "ack"
        case .refused: "refused"
        case .error: "error"
        case .hub: "hub"
        case .users: "users"
        case .snapshot: "snapshot"
        case .batch: "b"
        case .pong: "pong"
        }
    }
}

/// A message that is not one of the wire's, with the browser wire's error
/// name for it (`MALFORMED`) and what was wrong, in words.
extension BrowserMessage.Edit {
    /// The hub's edit (board points to sample units), or why it is malformed.
    public func strokeEdit() throws(BrowserWireError) -> StrokeEdit {
        guard let strokes, !strokes.isEmpty, strokes.count <= StrokeEdit.maxStrokes else {
            throw BrowserWireError("MALFORMED", "edit has strokes: 1 to \(StrokeEdit.maxStrokes) stroke ids")
        }
        let ids = strokes.map(StrokeID.init)
        func units(_ value: Double?, _ name: String) throws(BrowserWireError) -> Int32 {
            let value = value ?? 0
            guard value.isFinite, abs(value) <= 2 * Sample.maxCoordinatePoints else {
                throw BrowserWireError("MALFORMED", "edit: \(name) is a number of points within ±\(Int(2 * Sample.maxCoordinatePoints))")
            }
            return Int32((value * Double(Sample.unitsPerPoint)).rounded())
        }
        func transform() throws(BrowserWireError) -> StrokeTransform {
            let scale = scale ?? 1
            guard scale.isFinite, StrokeTransform.scales.contains(scale) else {
                throw BrowserWireError("MALFORMED", "edit: scale is a number from 1/64 to 64")
            }
            return StrokeTransform(
                offsetX: try units(dx, "dx"), offsetY: try units(dy, "dy"), scale: scale, originX: try units(ox, "ox"), originY: try units(oy, "oy"))
        }
        switch op {
        case "move": return StrokeEdit(strokes: ids, change: .transform(try transform()))
        case "duplicate": return StrokeEdit(strokes: ids, change: .duplicate(try transform()))
        case "delete": return StrokeEdit(strokes: ids, change: .delete)
        case "recolour":
            guard let rgba else { throw BrowserWireError("MALFORMED", "edit: recolour needs rgba (an integer 0xRRGGBBAA)") }
            return StrokeEdit(strokes: ids, change: .recolour(rgba: rgba))
        default:
            throw BrowserWireError("MALFORMED", "edit: op is move, duplicate, recolour or delete")
        }
    }
}

public struct BrowserWireError: Error, Sendable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var description: String { "\(code): \(message)" }
    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }
}

extension BrowserMessage: Codable {
    private enum Key: String, CodingKey {
        case t, n, board, resume, name, token, phase, id, s, p, rgba, width, strokes, scope, at
        case user, acked, role, code, message, from, state, retry_after_ms, list, wire, x, y, laser, view
        case op, dx, dy, scale, ox, oy
    }

    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            guard (try? array.decode(String.self)) == "b" else {
                throw BrowserWireError("MALFORMED", "an array message is a batch: [\"b\", seq, diffs]")
            }
            self = .batch(try BrowserBatch(afterLetter: &array))
            return
        }
        let object: KeyedDecodingContainer<Key>
        do { object = try decoder.container(keyedBy: Key.self) } catch {
            throw BrowserWireError("MALFORMED", "a message is a JSON object with t (or a batch array)")
        }
        guard let kind = try? object.decode(String.self, forKey: .t) else {
            throw BrowserWireError("MALFORMED", "a message is a JSON object whose t names its kind")
        }
        func field<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
            do { return try object.decodeIfPresent(type, forKey: key) } catch {
                throw BrowserWireError("MALFORMED", "\(kind): \(key.stringValue) is not \(Self.describe(type))")
            }
        }
        func required<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
            guard let value = try field(type, key) else {
                throw BrowserWireError("MALFORMED", "\(kind) needs \(key == .n ? "its number n" : key.stringValue)")
            }
            return value
        }
        switch kind {
        case "hello":
            self = .hello(
                Hello(
                    board: try field(String.self, .board), resume: try field(String.self, .resume), name: try field(String.self, .name),
                    token: try field(String.self, .token), wire: try field(String.self, .wire)))
        case "touch":
            let n = try required(UInt64.self, .n)
            // Samples that are not lists of numbers are refused by the message's
            // number (it is taken), as any sample the gateway cannot use.
            func samples(_ key: Key) throws -> [[Double?]]? {
                do { return try object.decodeIfPresent([[Double?]].self, forKey: key) } catch {
                    throw RefusedByNumber(
                        kind: kind, number: n, code: "MALFORMED",
                        message: "a sample is [x, y, t, force, azimuth, altitude]: 3 to 6 elements, x, y and t numbers (\(key.stringValue) has something else)")
                }
            }
            self = .touch(Touch(n: n, phase: try field(String.self, .phase), id: try field(UInt64.self, .id), s: try samples(.s), p: try samples(.p)))
        case "style": self = .style(n: try required(UInt64.self, .n), rgba: try field(UInt32.self, .rgba), width: try field(Double.self, .width))
        case "undo": self = .undo(n: try required(UInt64.self, .n))
        case "redo": self = .redo(n: try required(UInt64.self, .n))
        case "erase": self = .erase(n: try required(UInt64.self, .n), strokes: try field([UInt64].self, .strokes))
        case "edit":
            self = .edit(
                Edit(
                    n: try required(UInt64.self, .n), strokes: try field([UInt64].self, .strokes), op: try field(String.self, .op),
                    dx: try field(Double.self, .dx), dy: try field(Double.self, .dy), scale: try field(Double.self, .scale),
                    ox: try field(Double.self, .ox), oy: try field(Double.self, .oy), rgba: try field(UInt32.self, .rgba)))
        case "clear": self = .clear(n: try required(UInt64.self, .n), scope: try field(String.self, .scope))
        case "ping": self = .ping(at: try field(Double.self, .at) ?? 0)
        case "resync": self = .resync
        case "name": self = .name(try field(String.self, .name))
        case "bye": self = .bye
        case "cursor":
            let x = try field(Double.self, .x), y = try field(Double.self, .y)
            guard (x == nil) == (y == nil) else { throw BrowserWireError("MALFORMED", "cursor has both x and y, or neither") }
            let view = try field([Double].self, .view)
            guard view == nil || view!.count == 4 else { throw BrowserWireError("MALFORMED", "a cursor's view is [minX, minY, maxX, maxY]") }
            self = .cursor(Cursor(x: x, y: y, laser: try field(Bool.self, .laser) ?? false, view: view))
        case "presence":
            self = .presence(
                Presence(
                    id: try required(UInt64.self, .id), user: try field(String.self, .user), name: try field(String.self, .name),
                    rgba: try field(UInt32.self, .rgba), x: try field(Double.self, .x), y: try field(Double.self, .y),
                    laser: try field(Bool.self, .laser), view: try field([Double].self, .view)))
        case "welcome":
            self = .welcome(
                Welcome(
                    user: try field(String.self, .user), resume: try field(String.self, .resume), board: try required(String.self, .board),
                    acked: try required(UInt64.self, .acked), role: try required(String.self, .role), name: try field(String.self, .name),
                    wire: try field(String.self, .wire) ?? "json"))
        case "ack": self = .ack(n: try required(UInt64.self, .n))
        case "refused":
            self = .refused(n: try required(UInt64.self, .n), code: try required(String.self, .code), message: try field(String.self, .message) ?? "")
        case "error":
            self = .error(
                code: try required(String.self, .code), message: try field(String.self, .message) ?? "",
                fromHub: try field(String.self, .from) == "hub")
        case "hub":
            switch try required(String.self, .state) {
            case "busy": self = .hub(.busy(retryAfterMilliseconds: try field(Int64.self, .retry_after_ms) ?? 0))
            case "unreachable": self = .hub(.unreachable)
            case "connected": self = .hub(.connected)
            case let other: throw BrowserWireError("MALFORMED", "hub state is busy, unreachable or connected, not \(other)")
            }
        case "users": self = .users(try required([TabUser].self, .list))
        case "snapshot": self = .snapshot(try BrowserSnapshot(from: decoder))
        case "pong": self = .pong(at: try field(Double.self, .at) ?? 0)
        default:
            // A numbered kind this side does not know is still refused by its number.
            if let number = try? object.decode(UInt64.self, forKey: .n) {
                throw RefusedByNumber(kind: kind, number: number)
            }
            throw BrowserWireError("MALFORMED", "unknown message type \(kind)")
        }
    }

    /// A message with a number that is refused by that number before it is
    /// read whole: a kind this side does not know, or a touch whose samples
    /// are not lists of numbers. The number is taken (`refused`, then acknowledged).
    public struct RefusedByNumber: Error, Sendable {
        public var kind: String
        public var number: UInt64
        public var code: String
        public var message: String

        public init(kind: String, number: UInt64, code: String = "MALFORMED", message: String? = nil) {
            self.kind = kind
            self.number = number
            self.code = code
            self.message = message ?? "unknown message type \(kind)"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is UInt64.Type, is UInt32.Type, is Int64.Type: "a whole number in range"
        case is Double.Type: "a number"
        case is [UInt64].Type: "a list of whole numbers"
        case is [Double].Type: "a list of numbers"
        case is Bool.Type: "true or false"
        default: "a list of samples (arrays of numbers or null)"
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if case .batch(let batch) = self {
            try batch.encode(to: encoder)
            return
        }
        if case .snapshot(let snapshot) = self {
            try snapshot.encode(to: encoder)
            return
        }
        var object = encoder.container(keyedBy: Key.self)
        try object.encode(kind, forKey: .t)
        switch self {
        case .hello(let hello):
            try object.encode(hello.board, forKey: .board)
            try object.encode(hello.resume, forKey: .resume)
            try object.encodeIfPresent(hello.name, forKey: .name)
            try object.encodeIfPresent(hello.token, forKey: .token)
            try object.encodeIfPresent(hello.wire, forKey: .wire)
        case .touch(let touch):
            try object.encode(touch.n, forKey: .n)
            try object.encodeIfPresent(touch.phase, forKey: .phase)
            try object.encodeIfPresent(touch.id, forKey: .id)
            try object.encodeIfPresent(touch.s, forKey: .s)
            try object.encodeIfPresent(touch.p, forKey: .p)
        case .style(let n, let rgba, let width):
            try object.encode(n, forKey: .n)
            try object.encodeIfPresent(rgba, forKey: .rgba)
            try object.encodeIfPresent(width, forKey: .width)
        case .undo(let n), .redo(let n):
            try object.encode(n, forKey: .n)
        case .erase(let n, let strokes):
            try object.encode(n, forKey: .n)
            try object.encodeIfPresent(strokes, forKey: .strokes)
        case .edit(let edit):
            try object.encode(edit.n, forKey: .n)
            try object.encodeIfPresent(edit.strokes, forKey: .strokes)
            try object.encodeIfPresent(edit.op, forKey: .op)
            for (value, key) in [(edit.dx, Key.dx), (edit.dy, .dy), (edit.scale, .scale), (edit.ox, .ox), (edit.oy, .oy)] {
                try object.encodeIfPresent(value, forKey: key)
            }
            try object.encodeIfPresent(edit.rgba, forKey: .rgba)
        case .clear(let n, let scope):
            try object.encode(n, forKey: .n)
            try object.encodeIfPresent(scope, forKey: .scope)
        case .ping(let at), .pong(let at):
            try object.encode(at, forKey: .at)
        case .resync, .bye:
            break
        case .name(let name):
            try object.encodeIfPresent(name, forKey: .name)
        case .cursor(let cursor):
            try object.encodeIfPresent(cursor.x, forKey: .x)
            try object.encodeIfPresent(cursor.y, forKey: .y)
            if cursor.laser { try object.encode(true, forKey: .laser) }
            try object.encodeIfPresent(cursor.view, forKey: .view)
        case .presence(let presence):
            try object.encode(presence.id, forKey: .id)
            try object.encode(presence.user, forKey: .user)
            try object.encode(presence.name, forKey: .name)
            try object.encode(presence.rgba, forKey: .rgba)
            try object.encode(presence.x, forKey: .x)
            try object.encode(presence.y, forKey: .y)
            try object.encodeIfPresent(presence.laser, forKey: .laser)
            try object.encodeIfPresent(presence.view, forKey: .view)
        case .welcome(let welcome):
            try object.encode(welcome.user, forKey: .user)
            try object.encode(welcome.resume, forKey: .resume)
            try object.encode(welcome.board, forKey: .board)
            try object.encode(welcome.acked, forKey: .acked)
            try object.encode(welcome.role, forKey: .role)
            try object.encode(welcome.name, forKey: .name)
            try object.encode(welcome.wire, forKey: .wire)
        case .ack(let n):
            try object.encode(n, forKey: .n)
        case .refused(let n, let code, let message):
            try object.encode(n, forKey: .n)
            try object.encode(code, forKey: .code)
            try object.encode(message, forKey: .message)
        case .error(let code, let message, let fromHub):
            try object.encode(code, forKey: .code)
            try object.encode(message, forKey: .message)
            if fromHub { try object.encode("hub", forKey: .from) }
        case .hub(let state):
            switch state {
            case .busy(let retryAfter):
                try object.encode("busy", forKey: .state)
                try object.encode(retryAfter, forKey: .retry_after_ms)
            case .unreachable: try object.encode("unreachable", forKey: .state)
            case .connected: try object.encode("connected", forKey: .state)
            }
        case .users(let list):
            try object.encode(list, forKey: .list)
        case .snapshot, .batch:
            break  // above
        }
    }
}

extension BrowserMessage {
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    /// The message as one JSON text frame.
    public var json: String {
        // The one message sent for every pointer event a tab draws: without an encoder.
        if case .ack(let n) = self { return "{\"t\":\"ack\",\"n\":\(n)}" }
        // Encoding these types cannot fail: every value is a string, a finite number or a list of them.
        return (try? String(decoding: Self.encoder.encode(self), as: UTF8.self)) ?? "{}"
    }

    /// Decodes one text frame. Throws `BrowserWireError` (MALFORMED, with why)
    /// or `RefusedByNumber`.
    public static func decode(_ text: String, with decoder: JSONDecoder = JSONDecoder()) throws -> BrowserMessage {
        if let touch = TouchMessageReader.read(text) { return .touch(touch) }  // the common case, in one pass
        do {
            return try decoder.decode(BrowserMessage.self, from: Data(text.utf8))
        } catch let error as BrowserWireError {
            throw error
        } catch let error as RefusedByNumber {
            throw error
        } catch DecodingError.dataCorrupted {
            throw BrowserWireError("MALFORMED", "not JSON")
        } catch {
            throw BrowserWireError("MALFORMED", "not a message: \(error)")
        }
    }
}
