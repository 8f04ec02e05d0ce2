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
