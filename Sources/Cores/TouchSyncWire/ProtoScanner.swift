// One-pass reading of the protobuf wire format straight out of a received
// buffer, for the hot messages (see `AgentFrameDecoder`). Anything this
// reader does not expect makes it give up (nil), never guess: the caller
// then decodes with SwiftProtobuf, which has the final word and the words
// for the error.

/// Why a one-pass reader stops: its caller decodes with SwiftProtobuf instead.
struct GiveUp: Error {}

/// `value`, or give up (a field that did not read).
@inline(__always)
func required<Value>(_ value: Value?) throws(GiveUp) -> Value {
    guard let value else { throw GiveUp() }
    return value
}

/// Stores a field's value read at most once: a second occurrence (which
/// protobuf merges, or lets the last win) or an unreadable value gives up.
@inline(__always)
func once<Value>(_ slot: inout Value?, _ value: Value?) throws(GiveUp) {
    guard slot == nil, let value else { throw GiveUp() }
    slot = value
}

/// The fields of one encoded protobuf message, in order.
@usableFromInline
struct ProtoScanner {
    /// Wire types (protobuf encoding spec).
    static let varint: UInt8 = 0
    static let lengthDelimited: UInt8 = 2

    let bytes: UnsafeRawBufferPointer
    private(set) var position: Int
    let end: Int

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        position = 0
        end = bytes.count
    }

    init(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) {
        self.bytes = bytes
        position = region.lowerBound
        end = region.upperBound
    }

    var isAtEnd: Bool { position >= end }

    /// The next field's number and wire type; nil at the end or on a bad tag.
    mutating func nextTag() -> (field: UInt32, wireType: UInt8)? {
        guard position < end, let tag = readVarint(), tag <= UInt64(UInt32.max) else { return nil }
        let field = UInt32(tag >> 3)
        guard field > 0 else { return nil }
        return (field, UInt8(tag & 7))
    }

    /// A varint exactly as SwiftProtobuf reads one (at most 10 bytes; bits
    /// past the 64th dropped).
    @inline(__always)
    mutating func readVarint() -> UInt64? {
        guard position < end else { return nil }
        var byte = bytes[position]
        position &+= 1
        if byte & 0x80 == 0 { return UInt64(byte) }
        var value = UInt64(byte & 0x7f)
        var shift: UInt64 = 7
        while true {
            guard position < end, shift <= 63 else { return nil }
            byte = bytes[position]
            position &+= 1
            value |= UInt64(byte & 0x7f) &<< shift
            if byte & 0x80 == 0 { return value }
            shift &+= 7
        }
    }

    mutating func readFixed32() -> UInt32? {
        guard end - position >= 4 else { return nil }
        var value: UInt32 = 0
        for shift in stride(from: 0, to: 32, by: 8) {
            value |= UInt32(bytes[position]) << UInt32(shift)
            position += 1
        }
        return value
    }

    mutating func readFixed64() -> UInt64? {
        guard let low = readFixed32(), let high = readFixed32() else { return nil }
        return UInt64(high) << 32 | UInt64(low)
    }

    /// A proto3 string: nil when its bytes are not UTF-8 (SwiftProtobuf refuses those).
    mutating func readString() -> String? {
        guard let region = readLengthDelimited() else { return nil }
        return validUTF8Text(UnsafeRawBufferPointer(rebasing: bytes[region]))
    }

    /// The body of a length-delimited field, as a range of `bytes`.
    mutating func readLengthDelimited() -> Range<Int>? {
        guard let length = readVarint(), length <= UInt64(end - position) else { return nil }
        let start = position
        position += Int(length)
        return start..<position
    }
}

import TouchSyncCore

extension ProtoScanner {
    /// A `StrokeStyle` message in canonical form (nil otherwise).
    static func style(in bytes: UnsafeRawBufferPointer, _ region: Range<Int>) -> StrokeStyle? {
        var scanner = ProtoScanner(bytes, region)
        var rgba: UInt32?, width: UInt64?
        while !scanner.isAtEnd {
            guard let (field, wireType) = scanner.nextTag() else { return nil }
            switch (field, wireType) {
            case (1, 5) where rgba == nil:
                guard let value = scanner.readFixed32() else { return nil }
                rgba = value
            case (2, ProtoScanner.varint) where width == nil:
                guard let value = scanner.readVarint() else { return nil }
                width = value
            default: return nil
            }
        }
        return StrokeStyle(rgba: rgba ?? 0, width: UInt32(truncatingIfNeeded: width ?? 0))
    }
}

/// A packed repeated varint field, checked once (every varint complete, at
/// most 10 bytes) and then read without further checks.
@usableFromInline
struct PackedVarints {
    @usableFromInline let base: UnsafePointer<UInt8>?
    @usableFromInline var position: Int
    @usableFromInline let end: Int
    /// How many values the field holds.
    let count: Int

    static var empty: PackedVarints { PackedVarints(base: nil, position: 0, end: 0, count: 0) }

    private init(base: UnsafePointer<UInt8>?, position: Int, end: Int, count: Int) {
        self.base = base
        self.position = position
        self.end = end
        self.count = count
    }

    /// nil when a varint is cut off or longer than 10 bytes.
    init?(_ bytes: UnsafeRawBufferPointer, _ region: Range<Int>) {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            guard region.isEmpty else { return nil }
            self = .empty
            return
        }
        guard let count = Self.countVarints(base, region) else { return nil }
        self.init(base: base, position: region.lowerBound, end: region.upperBound, count: count)
    }

    /// The varints in `region`: the bytes below 0x80 end one. Nil when a run
    /// of 10 or more continuation bytes (a varint longer than 10 bytes) or
    /// the last byte does not end one. Counted a word at a time
    /// (`forEachVarintEndWord`): only the continuation bytes before a word's
    /// first end and after its last can extend a run across words (within a
    /// word two ends are at most 6 bytes apart).
    static func countVarints(_ base: UnsafePointer<UInt8>, _ region: Range<Int>) -> Int? {
        var count = 0
        var run = 0  // continuation bytes since the last end
        forEachVarintEndWord(base + region.lowerBound, count: region.count) { ends, _, width in
            guard ends != 0 else {
                run += width
                return run < 10
            }
            if run + ends.trailingZeroBitCount / 8 >= 10 {
                run = 10
                return false
            }
            count += ends.nonzeroBitCount
            run = ends.leadingZeroBitCount / 8 - (8 - width)  // the word's bytes after its last end
            return true
        }
        return run == 0 ? count : nil
    }

    @inlinable
    var hasMore: Bool { position < end }

    /// The next value; only while `hasMore` (every varint was checked).
    @inlinable @inline(__always)
    mutating func next() -> UInt64 {
        readWholeVarint(base.unsafelyUnwrapped, &position)
    }

    /// Protobuf's sint32: zigzag over the low 32 bits (as SwiftProtobuf reads it).
    @inlinable @inline(__always)
    mutating func nextSInt32() -> Int32 {
        let raw = UInt32(truncatingIfNeeded: next())
        return Int32(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    @inlinable @inline(__always)
    mutating func nextSInt64() -> Int64 {
        let raw = next()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }
}

/// Writes the protobuf wire format as SwiftProtobuf does (fields in number
/// order, proto3 defaults omitted, repeated scalars packed), so the hot
/// messages can be written straight from the model, byte for byte as the
/// generated code would.
@usableFromInline
package struct ProtoWriter {
    package var bytes: [UInt8] = []

    package init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// An empty writer whose bytes start with `prefix` (a header patched in later).
    package init(prefix: Int, capacity: Int) {
        bytes.reserveCapacity(prefix + capacity)
        bytes.append(contentsOf: repeatElement(0, count: prefix))
    }

    /// The bytes `varint(value)` writes.
    @inline(__always)
    package static func varintSize(_ value: UInt64) -> Int { value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7 }

    @inline(__always)
    package mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    @inline(__always)
    package mutating func tag(_ field: UInt32, _ wireType: UInt8) { varint(UInt64(field) << 3 | UInt64(wireType)) }

    package mutating func uint64Field(_ field: UInt32, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, ProtoScanner.varint)
        varint(value)
    }

    mutating func sint64Field(_ field: UInt32, _ value: Int64) {
        guard value != 0 else { return }
        tag(field, ProtoScanner.varint)
        varint(zigZag(value))
    }

    package mutating func fixed32Field(_ field: UInt32, _ value: UInt32) {
        guard value != 0 else { return }
        tag(field, 5)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func fixed64Field(_ field: UInt32, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, 1)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    package mutating func stringField(_ field: UInt32, _ value: String) {
        guard !value.isEmpty else { return }
        var value = value
        value.withUTF8 { utf8 in
            lengthDelimitedHeader(field, length: utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    /// An already encoded message (or bytes field) as field `field`.
    package mutating func bytesField(_ field: UInt32, _ value: [UInt8]) {
        lengthDelimitedHeader(field, length: value.count)
        bytes.append(contentsOf: value)
    }

    /// A length-delimited field's tag and length; the caller writes its `length` bytes next.
    package mutating func lengthDelimitedHeader(_ field: UInt32, length: Int) {
        tag(field, ProtoScanner.lengthDelimited)
        varint(UInt64(length))
    }

    /// A length-delimited field (a message or a packed column) whose body
    /// `body` writes: the length is patched in afterwards (one byte
    /// reserved, moved along when it needs more).
    @inline(__always)
    mutating func lengthDelimited(_ field: UInt32, _ body: (inout ProtoWriter) -> Void) {
        tag(field, ProtoScanner.lengthDelimited)
        bytes.append(0)
        let start = bytes.count
        body(&self)
        let length = bytes.count - start
        if length < 0x80 {
            bytes[start - 1] = UInt8(length)
            return
        }
        var prefix: [UInt8] = []
        var value = UInt64(length)
        while value >= 0x80 {
            prefix.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        prefix.append(UInt8(value))
        bytes.replaceSubrange((start - 1)..<start, with: prefix)
    }

    /// A packed repeated field; nothing when `values` is empty.
    @inline(__always)
    mutating func packed<Values: Collection>(_ field: UInt32, _ values: Values, _ encode: (Values.Element) -> UInt64) {
        guard !values.isEmpty else { return }
        lengthDelimited(field) { writer in
            for value in values { writer.varint(encode(value)) }
        }
    }
}

/// The text of `raw`, nil when its bytes are not UTF-8 (what SwiftProtobuf
/// refuses). `String(validating:as:)` is generic and looks up metadata on
/// every call (5% of a replica's decoding, where every batch and began diff
/// carries a name); decoding, which replaces invalid sequences with U+FFFD,
/// then comparing with the bytes is not.
public func validUTF8Text(_ raw: UnsafeRawBufferPointer) -> String? {
    raw.withMemoryRebound(to: UInt8.self) { bytes in
        let string = String(decoding: bytes, as: UTF8.self)
        var unchanged = string.utf8.count == bytes.count
        if unchanged {
            unchanged = string.utf8.withContiguousStorageIfAvailable { $0.elementsEqual(bytes) } ?? string.utf8.elementsEqual(bytes)
        }
        return unchanged ? string : nil
    }
}
