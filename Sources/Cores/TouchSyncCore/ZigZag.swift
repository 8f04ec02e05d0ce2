/// Protobuf's zig-zag mapping of signed to unsigned integers (small
/// magnitudes to small numbers, so their varints are short): shared by the
/// wire codecs and the packed stroke storage.
@inlinable @inline(__always)
public func zigZag(_ value: Int64) -> UInt64 { UInt64(bitPattern: (value << 1) ^ (value >> 63)) }

@inlinable @inline(__always)
public func zigZag(_ value: Int32) -> UInt64 { UInt64(UInt32(bitPattern: (value << 1) ^ (value >> 31))) }

/// The inverse of `zigZag` (protobuf's sint64 decoding; a 32-bit value's
/// encoding decodes to the same value).
@inlinable @inline(__always)
public func zigZagDecoded(_ raw: UInt64) -> Int64 { Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1))) }

/// Reads one checked varint from `base[position..<end]` and moves `position`
/// past it; nil when it is cut off or longer than 64 bits. Shared by the
/// packed readers of the wire (TouchSyncWire) and of stored strokes.
@inline(__always)
package func readCheckedVarint(_ base: UnsafePointer<UInt8>, _ position: inout Int, end: Int) -> UInt64? {
    var value: UInt64 = 0
    var shift: UInt64 = 0
    while position < end, shift < 64 {
        let byte = base[position]
        position += 1
        value |= UInt64(byte & 0x7F) << shift
        if byte & 0x80 == 0 { return value }
        shift += 7
    }
    return nil
}

/// Reads one varint at `base[position]` and moves `position` past it,
/// checking nothing: for bytes already proved to be whole varints (a packed
/// stroke's residuals, checked when packed or received), where a bound
/// check per byte would only cost. Most residuals take one byte.
@inlinable @inline(__always)
package func readWholeVarint(_ base: UnsafePointer<UInt8>, _ position: inout Int) -> UInt64 {
    var byte = base[position]
    position &+= 1
    if byte < 0x80 { return UInt64(byte) }
    var value = UInt64(byte & 0x7f)
    var shift: UInt64 = 7
    repeat {
        byte = base[position]
        position &+= 1
        value |= UInt64(byte & 0x7f) << shift
        shift &+= 7
    } while byte >= 0x80
    return value
}

/// Walks `count` bytes from `base` eight at a time and hands `body` the
/// varint ends of each word: the high bit of every byte below 0x80 (the last
/// byte of a varint), bytes in memory order from the lowest bits; the bytes
/// past the last whole word one at a time (`width` 1). Counting varints, or
/// finding every n-th, then costs a popcount a word, not a test a byte.
/// Stops when `body` returns false.
@inlinable @inline(__always)
package func forEachVarintEndWord(
    _ base: UnsafePointer<UInt8>, count: Int, _ body: (_ endBits: UInt64, _ index: Int, _ width: Int) -> Bool
) {
    let highBits: UInt64 = 0x8080_8080_8080_8080
    var index = 0
    while index + 8 <= count {
        let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
        guard body(~word & highBits, index, 8) else { return }
        index += 8
    }
    while index < count {
        guard body(base[index] < 0x80 ? 0x80 : 0, index, 1) else { return }
        index += 1
    }
}
