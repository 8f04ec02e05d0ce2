/// The gateway's hot path: a `touch` message read in one pass over its UTF-8
/// bytes, without `JSONDecoder` (which took half of the gateway's Swift
/// concurrency threads at 300 drawing tabs: generic metadata lookups and a
/// container per sample). Only the shape the page sends is read here: an
/// object with t "touch" and n, phase, id, s, p (numbers, strings without
/// escapes, null); anything else (other keys, escapes, a repeated key, a
/// number that is not plain) returns nil and goes through `JSONDecoder`, so
/// errors and odd inputs keep one definition. When it returns a message, it
/// is the one `JSONDecoder` gives (BrowserMessageTests).
public enum TouchMessageReader {
    public static func read(_ text: String) -> BrowserMessage.Touch? {
        var text = text
        return text.withUTF8 { bytes in
            var reader = Reader(bytes: bytes)
            return reader.touch()
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var at = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func touch() -> BrowserMessage.Touch? {
            var kind = false
            var n: UInt64? = nil
            var phase: String?? = nil
            var id: UInt64?? = nil
            var s: [[Double?]]?? = nil
            var p: [[Double?]]?? = nil
            guard take(UInt8(ascii: "{")) else { return nil }
            if take(UInt8(ascii: "}")) { return nil }
            repeat {
                guard let key = plainString(), take(UInt8(ascii: ":")) else { return nil }
                switch key {
                case "t":
                    guard !kind, plainString() == "touch" else { return nil }
                    kind = true
                case "n":
                    guard n == nil, let value = unsigned() else { return nil }
                    n = value
                case "phase":
                    guard phase == nil else { return nil }
                    if takeNull() { phase = .some(nil) } else if let value = plainString() { phase = value } else { return nil }
                case "id":
                    guard id == nil else { return nil }
                    if takeNull() { id = .some(nil) } else if let value = unsigned() { id = value } else { return nil }
                case "s":
                    guard s == nil, let value = samples() else { return nil }
                    s = value
                case "p":
                    guard p == nil, let value = samples() else { return nil }
                    p = value
                default:
                    return nil
                }
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")), kind, let n else { return nil }
            skipSpace()
            guard at == bytes.count else { return nil }
            return BrowserMessage.Touch(n: n, phase: phase ?? nil, id: id ?? nil, s: s ?? nil, p: p ?? nil)
        }

        /// null, or an array of arrays of numbers and nulls.
        mutating func samples() -> [[Double?]]?? {
            if takeNull() { return .some(nil) }
            guard take(UInt8(ascii: "[")) else { return nil }
            var rows: [[Double?]] = []
            if take(UInt8(ascii: "]")) { return rows }
            repeat {
                guard take(UInt8(ascii: "[")) else { return nil }
                var row: [Double?] = []
                row.reserveCapacity(8)
                if !take(UInt8(ascii: "]")) {
                    repeat {
                        if takeNull() {
                            row.append(nil)
                        } else if let value = number() {
                            row.append(value)
                        } else {
                            return nil
                        }
                    } while take(UInt8(ascii: ","))
                    guard take(UInt8(ascii: "]")) else { return nil }
                }
                rows.append(row)
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "]")) else { return nil }
            return rows
        }

        mutating func skipSpace() {
            while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard at < bytes.count, bytes[at] == byte else { return false }
            at += 1
            return true
        }

        mutating func takeNull() -> Bool {
            skipSpace()
            guard at + 4 <= bytes.count, bytes[at] == UInt8(ascii: "n"), bytes[at + 1] == UInt8(ascii: "u"),
                bytes[at + 2] == UInt8(ascii: "l"), bytes[at + 3] == UInt8(ascii: "l")
            else { return false }
            at += 4
            return true
        }

        /// A string without escapes or control characters (nil otherwise: the slow path reads it).
        mutating func plainString() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = at
            while at < bytes.count {
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") {
                    at += 1
                    return String(validating: UnsafeBufferPointer(rebasing: bytes[start..<(at - 1)]), as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                at += 1
            }
            return nil
        }

        /// A JSON integer without sign, fraction or exponent that fits UInt64.
        mutating func unsigned() -> UInt64? {
            skipSpace()
            let start = at
            var value: UInt64 = 0
            while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") {
                let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (plus, overflow2) = times.addingReportingOverflow(UInt64(bytes[at] - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                value = plus
                at += 1
            }
            let digits = at - start
            guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
            // A fraction or exponent: the slow path decides (5.0 may or may not be an integer to it).
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") || bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") { return nil }
            return value
        }

        /// A number in JSON's grammar, as `Double` reads its text.
        mutating func number() -> Double? {
            skipSpace()
            let start = at
            func digits() -> Int {
                let first = at
                while at < bytes.count, bytes[at] >= UInt8(ascii: "0"), bytes[at] <= UInt8(ascii: "9") { at += 1 }
                return at - first
            }
            if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
            let integerStart = at
            let integerDigits = digits()
            guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { return nil }
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
                at += 1
                guard digits() > 0 else { return nil }
            }
            if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
                at += 1
                if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
                guard digits() > 0 else { return nil }
            }
            guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self),
                let value = Double(text), value.isFinite
            else { return nil }
            return value
        }
    }
}
