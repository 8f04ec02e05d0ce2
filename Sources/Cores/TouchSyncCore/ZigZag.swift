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
@inline(__always)
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
