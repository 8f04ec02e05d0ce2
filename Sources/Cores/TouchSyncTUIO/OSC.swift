/// Open Sound Control 1.0 (and the 1.1 type tags TUIO uses): packets are a
/// message or a bundle of packets. Everything is big-endian and padded to
/// four bytes. The decoder checks every length against what is left, so any
/// byte string either decodes or throws `OSCError`; it never traps.
public enum OSCValue: Sendable, Equatable {
    case int32(Int32)  // i
    case float32(Float)  // f
    case string(String)  // s
    case blob([UInt8])  // b
    case int64(Int64)  // h
    case double(Double)  // d
    case timeTag(UInt64)  // t
    case bool(Bool)  // T, F
    case null  // N

    public var int32: Int32? { if case .int32(let value) = self { value } else { nil } }
    public var float: Float? {
        switch self {
        case .float32(let value): value
        case .double(let value): Float(value)
        case .int32(let value): Float(value)
        default: nil
        }
    }
    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var timeTag: UInt64? { if case .timeTag(let value) = self { value } else { nil } }
}

public struct OSCMessage: Sendable, Equatable {
    public var address: String
    public var arguments: [OSCValue]

    public init(_ address: String, _ arguments: [OSCValue]) {
        self.address = address
        self.arguments = arguments
    }
}

public indirect enum OSCPacket: Sendable, Equatable {
    case message(OSCMessage)
    /// `timeTag` 1 means "immediately" (no time).
    case bundle(timeTag: UInt64, [OSCPacket])

    /// Every message, bundles flattened in order, each with the innermost bundle's time tag.
    public func messages(timeTag outer: UInt64 = 1) -> [(timeTag: UInt64, message: OSCMessage)] {
        switch self {
        case .message(let message): [(outer, message)]
        case .bundle(let timeTag, let elements): elements.flatMap { $0.messages(timeTag: timeTag) }
        }
    }
}

public struct OSCError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// OSC time tags: NTP format, seconds since 1900 in the high 32 bits.
public enum OSCTime {
    public static let immediately: UInt64 = 1
    /// Seconds since 1970 (Unix time).
    public static func unixSeconds(_ timeTag: UInt64) -> Double {
        Double(timeTag >> 32) - 2_208_988_800 + Double(timeTag & 0xFFFF_FFFF) / 4_294_967_296
    }
    public static func timeTag(unixSeconds: Double) -> UInt64 {
        let seconds = unixSeconds + 2_208_988_800
        let whole = UInt64(seconds.rounded(.down))
        return whole << 32 | UInt64((seconds - Double(whole)) * 4_294_967_296)
    }
}

public enum OSCDecoder {
    /// Bundles nested deeper than this are refused (a hostile packet cannot recurse without end).
    public static let maxDepth = 8

    public static func decode(_ bytes: [UInt8]) throws(OSCError) -> OSCPacket {
        var reader = Reader(bytes: bytes, position: 0, end: bytes.count)
        let packet = try packet(&reader, depth: 0)
        guard reader.position == reader.end else { throw OSCError("\(reader.end - reader.position) bytes after the packet") }
        return packet
    }

    private static func packet(_ reader: inout Reader, depth: Int) throws(OSCError) -> OSCPacket {
        guard reader.remaining > 0 else { throw OSCError("empty packet") }
        if reader.bytes[reader.position] == UInt8(ascii: "#") {
            guard depth < maxDepth else { throw OSCError("bundles nested deeper than \(maxDepth)") }
            guard try reader.string() == "#bundle" else { throw OSCError("an address starting with # that is not #bundle") }
            let timeTag = try reader.uint64()
            var elements: [OSCPacket] = []
            while reader.remaining > 0 {
                let size = Int(try reader.int32())
                guard size > 0, size % 4 == 0, size <= reader.remaining else { throw OSCError("a bundle element of \(size) bytes") }
                var inner = Reader(bytes: reader.bytes, position: reader.position, end: reader.position + size)
                elements.append(try packet(&inner, depth: depth + 1))
                guard inner.position == inner.end else { throw OSCError("a bundle element longer than its content") }
                reader.position += size
            }
            return .bundle(timeTag: timeTag, elements)
        }
        let address = try reader.string()
        guard address.hasPrefix("/") else { throw OSCError("an address must start with /") }
        var arguments: [OSCValue] = []
        guard reader.remaining > 0 else { return .message(OSCMessage(address, [])) }  // OSC 1.0 allows no type tags
        let tags = try reader.string()
        guard tags.first == "," else { throw OSCError("type tags must start with a comma") }
        for tag in tags.utf8.dropFirst() {
            switch tag {
            case UInt8(ascii: "i"): arguments.append(.int32(try reader.int32()))
            case UInt8(ascii: "f"): arguments.append(.float32(Float(bitPattern: UInt32(bitPattern: try reader.int32()))))
            case UInt8(ascii: "s"), UInt8(ascii: "S"): arguments.append(.string(try reader.string()))
            case UInt8(ascii: "b"): arguments.append(.blob(try reader.blob()))
            case UInt8(ascii: "h"): arguments.append(.int64(Int64(bitPattern: try reader.uint64())))
            case UInt8(ascii: "d"): arguments.append(.double(Double(bitPattern: try reader.uint64())))
            case UInt8(ascii: "t"): arguments.append(.timeTag(try reader.uint64()))
            case UInt8(ascii: "T"): arguments.append(.bool(true))
            case UInt8(ascii: "F"): arguments.append(.bool(false))
            case UInt8(ascii: "N"): arguments.append(.null)
            default: throw OSCError("unknown type tag \(Character(Unicode.Scalar(tag)))")
            }
        }
        return .message(OSCMessage(address, arguments))
    }

    private struct Reader {
        let bytes: [UInt8]
        var position: Int
        let end: Int
        var remaining: Int { end - position }

        mutating func int32() throws(OSCError) -> Int32 {
            guard remaining >= 4 else { throw OSCError("truncated: an int32 needs 4 bytes, \(remaining) left") }
            var value: UInt32 = 0
            for offset in 0..<4 { value = value << 8 | UInt32(bytes[position + offset]) }
            position += 4
            return Int32(bitPattern: value)
        }

        mutating func uint64() throws(OSCError) -> UInt64 {
            guard remaining >= 8 else { throw OSCError("truncated: 8 bytes needed, \(remaining) left") }
            var value: UInt64 = 0
            for offset in 0..<8 { value = value << 8 | UInt64(bytes[position + offset]) }
            position += 8
            return value
        }

        /// A NUL-terminated string padded to four bytes.
        mutating func string() throws(OSCError) -> String {
            var terminator = position
            while terminator < end && bytes[terminator] != 0 { terminator += 1 }
            guard terminator < end else { throw OSCError("truncated: a string without its NUL") }
            let text = String(decoding: bytes[position..<terminator], as: UTF8.self)
            let padded = (terminator - position + 4) & ~3
            guard padded <= remaining else { throw OSCError("truncated: a string's padding") }
            position += padded
            return text
        }

        mutating func blob() throws(OSCError) -> [UInt8] {
            let size = Int(try int32())
            let padded = (size + 3) & ~3
            guard size >= 0, padded <= remaining else { throw OSCError("truncated: a blob of \(size) bytes") }
            let blob = Array(bytes[position..<(position + size)])
            position += padded
            return blob
        }
    }
}

public enum OSCEncoder {
    public static func encode(_ packet: OSCPacket) -> [UInt8] {
        var out: [UInt8] = []
        write(packet, into: &out)
        return out
    }

    private static func write(_ packet: OSCPacket, into out: inout [UInt8]) {
        switch packet {
        case .message(let message):
            string(message.address, into: &out)
            string("," + String(message.arguments.map(tag)), into: &out)
            for argument in message.arguments {
                switch argument {
                case .int32(let value): int32(value, into: &out)
                case .float32(let value): int32(Int32(bitPattern: value.bitPattern), into: &out)
                case .string(let value): string(value, into: &out)
                case .blob(let value):
                    int32(Int32(value.count), into: &out)
                    out += value
                    out += Array(repeating: 0, count: (4 - value.count % 4) % 4)
                case .int64(let value): uint64(UInt64(bitPattern: value), into: &out)
                case .double(let value): uint64(value.bitPattern, into: &out)
                case .timeTag(let value): uint64(value, into: &out)
                case .bool, .null: break
                }
            }
        case .bundle(let timeTag, let elements):
            string("#bundle", into: &out)
            uint64(timeTag, into: &out)
            for element in elements {
                let bytes = encode(element)
                int32(Int32(bytes.count), into: &out)
                out += bytes
            }
        }
    }

    private static func tag(_ value: OSCValue) -> Character {
        switch value {
        case .int32: "i"
        case .float32: "f"
        case .string: "s"
        case .blob: "b"
        case .int64: "h"
        case .double: "d"
        case .timeTag: "t"
        case .bool(let value): value ? "T" : "F"
        case .null: "N"
        }
    }

    private static func string(_ text: String, into out: inout [UInt8]) {
        out += Array(text.utf8)
        out += Array(repeating: 0, count: 4 - text.utf8.count % 4)
    }

    private static func int32(_ value: Int32, into out: inout [UInt8]) {
        let bits = UInt32(bitPattern: value)
        out += [UInt8(bits >> 24), UInt8(bits >> 16 & 0xFF), UInt8(bits >> 8 & 0xFF), UInt8(bits & 0xFF)]
    }

    private static func uint64(_ value: UInt64, into out: inout [UInt8]) {
        int32(Int32(bitPattern: UInt32(value >> 32)), into: &out)
        int32(Int32(bitPattern: UInt32(value & 0xFFFF_FFFF)), into: &out)
    }
}
