import TouchSyncCore

/// The gateway's wire format to the page (JSON text frames; docs/protocol.md,
/// "The browser wire"). Boards go out as the hub's fixed point, unchanged:
/// positions in 1/64 point, times in microseconds, force in 1/1024. A sample
/// list is flat, four integers per sample (x, y, t, force), each sample's x,
/// y and t as the difference from the previous sample in the list (the first
/// absolute), so a sample on a moving finger costs about 12 bytes of JSON.
/// Angles and sample flags are not sent: the page draws, it does not store.
public enum BrowserWire {
    /// One batch, encoded once and sent to every tab on the board, as
    /// `["b", sequence, [diff, …]]` (with the hub time appended when
    /// `withTime`, for the replay view). `board` is the board before the
    /// batch: appended and predicted samples continue the stroke's delta
    /// chain from its last sample, so a moving finger's first sample in a
    /// batch costs as little as the others.
    public static func batch(_ batch: DiffBatch, before board: BoardState?, withTime: Bool = false) -> String {
        var out = "[\"b\",\(batch.sequence),["
        out.reserveCapacity(32 + batch.diffs.count * 40)
        var last: [StrokeID: Sample] = [:]
        func lastSample(of id: StrokeID) -> Sample? {
            if let known = last[id] { return known }
            return board?.activeStroke(id)?.samples.last
        }
        for (index, diff) in batch.diffs.enumerated() {
            if index > 0 { out += "," }
            switch diff {
            case .appended(let id, let offset, let samples):
                out += "[\"a\",\(id.rawValue),\(offset),"
                append(samples, from: offset > 0 ? lastSample(of: id) : nil, to: &out)
                out += "]"
                if let newest = samples.last { last[id] = newest }
            case .predicted(let id, let samples):
                out += "[\"p\",\(id.rawValue),"
                append(samples, from: lastSample(of: id), to: &out)
                out += "]"
            default:
                append(diff, to: &out)
            }
        }
        out += "]"
        if withTime { out += ",\(batch.hubTime)" }
        out += "]"
        return out
    }

    /// The batch from the board *after* it (a fan-out that keeps no copy of the
    /// board before it): an append at `offset` continues from the stroke's
    /// sample `offset - 1`, a prediction from the last sample stored at that
    /// point of the batch. The same text as `batch(_:before:)`, except for a
    /// stroke gone by the end of the batch: its samples are left out (an empty
    /// prediction keeps the diff list's length), which changes no page's board.
    public static func batch(_ batch: DiffBatch, after board: BoardState, withTime: Bool = false) -> String {
        text(of: model(batch, after: board, withTime: withTime))
    }

    /// `batch(_:after:)` as the wire's integers, which the JSON text and the
    /// binary frames (`BrowserBinary`) both write.
    public static func model(_ batch: DiffBatch, after board: BoardState, withTime: Bool = false) -> BrowserBatch {
        // Samples each stroke gains in this batch, and those seen so far while writing it.
        var appendedInBatch: [StrokeID: Int] = [:]
        for diff in batch.diffs {
            if case .appended(let id, _, let samples) = diff { appendedInBatch[id, default: 0] += samples.count }
        }
        var appendedSoFar: [StrokeID: Int] = [:]
        func stroke(_ id: StrokeID) -> Stroke? {
            if let active = board.activeStroke(id) { return active }
            // Accepted in this batch: among the last accepted strokes.
            return board.acceptedStrokes.last(where: { $0.id == id })
        }
        func sample(of id: StrokeID, at offset: Int) -> Sample? {
            guard offset >= 0, let stroke = stroke(id), offset < stroke.samples.count else { return nil }
            return stroke.samples[offset]
        }
        var diffs: [BrowserDiff] = []
        diffs.reserveCapacity(batch.diffs.count)
        for diff in batch.diffs {
            switch diff {
            case .appended(let id, _, _) where stroke(id) == nil, .predicted(let id, _) where stroke(id) == nil:
                // Gone by the end of the batch (cancelled, or accepted and then removed):
                // its samples could not be continued, and a page never shows them.
                diffs.append(.predicted(id: id.rawValue, samples: []))
            case .appended(let id, let offset, let samples):
                diffs.append(.appended(id: id.rawValue, offset: Int(offset), samples: flat(samples, from: offset > 0 ? sample(of: id, at: Int(offset) - 1) : nil)))
                appendedSoFar[id, default: 0] += samples.count
            case .predicted(let id, let samples):
                let stored = stroke(id).map { $0.samples.count - (appendedInBatch[id] ?? 0) + (appendedSoFar[id] ?? 0) }
                diffs.append(.predicted(id: id.rawValue, samples: flat(samples, from: stored.flatMap { sample(of: id, at: $0 - 1) })))
            default:
                diffs.append(model(diff))
            }
        }
        return BrowserBatch(seq: batch.sequence, diffs: diffs, hubTime: withTime ? batch.hubTime : nil)
    }

    /// A diff other than an append or a prediction continuing a chain.
    static func model(_ diff: StrokeDiff) -> BrowserDiff {
        switch diff {
        case .began(let id, let owner, let touch, let style):
            .began(id: id.rawValue, owner: owner.rawValue, touch: touch, rgba: style.rgba, width: style.width)
        case .appended(let id, let offset, let samples): .appended(id: id.rawValue, offset: Int(offset), samples: flat(samples, from: nil))
        case .predicted(let id, let samples): .predicted(id: id.rawValue, samples: flat(samples, from: nil))
        case .amended(let id, let offset, let sample): .amended(id: id.rawValue, offset: Int(offset), sample: flat([sample], from: nil))
        case .accepted(let id, let position): .accepted(id: id.rawValue, position: Int(position))
        case .cancelled(let id): .cancelled(id: id.rawValue)
        case .cleared(let owner): .cleared(owner: owner?.rawValue)
        case .removed(let id): .removed(id: id.rawValue)
        case .restored(let stroke): .restored(model(stroke))
        }
    }

    static func model(_ stroke: Stroke) -> BrowserStroke {
        BrowserStroke(
            id: stroke.id.rawValue, owner: stroke.owner.rawValue, touch: stroke.touch, rgba: stroke.style.rgba, w: stroke.style.width,
            pos: stroke.acceptedPosition.map { Int($0) }, s: flat(stroke.samples, from: nil), p: flat(stroke.predicted, from: stroke.samples.last))
    }

    /// Four integers per sample: x, y, t as deltas from the previous sample
    /// (the first from `base`, or absolute without one), force (0: none).
    static func flat<Samples: Sequence<Sample>>(_ samples: Samples, from base: Sample?) -> [Int64] {
        var out: [Int64] = []
        out.reserveCapacity(samples.underestimatedCount * 4)
        var x = Int64(base?.x ?? 0)
        var y = Int64(base?.y ?? 0)
        var t = base?.time ?? 0
        for sample in samples {
            out.append(Int64(sample.x) - x)
            out.append(Int64(sample.y) - y)
            out.append(sample.time - t)
            out.append(sample.flags.contains(.hasForce) ? Int64(sample.force) : 0)
            x = Int64(sample.x)
            y = Int64(sample.y)
            t = sample.time
        }
        return out
    }

    /// A batch as JSON text: `["b", seq, [diff, …]]`, the hub time last when it has one.
    public static func text(of batch: BrowserBatch) -> String {
        var out = "[\"b\",\(batch.seq),["
        out.reserveCapacity(32 + batch.diffs.count * 40)
        for (index, diff) in batch.diffs.enumerated() {
            if index > 0 { out += "," }
            switch diff {
            case .began(let id, let owner, let touch, let rgba, let width):
                out += "[\"b\",\(id),\(quoted(owner)),\(touch),\(rgba),\(width)]"
            case .appended(let id, let offset, let samples):
                out += "[\"a\",\(id),\(offset),"
                append(samples, to: &out)
                out += "]"
            case .predicted(let id, let samples):
                out += "[\"p\",\(id),"
                append(samples, to: &out)
                out += "]"
            case .amended(let id, let offset, let sample):
                out += "[\"m\",\(id),\(offset),"
                append(sample, to: &out)
                out += "]"
            case .accepted(let id, let position): out += "[\"A\",\(id),\(position)]"
            case .cancelled(let id): out += "[\"c\",\(id)]"
            case .cleared(let owner): out += "[\"C\",\(owner.map(quoted) ?? "null")]"
            case .removed(let id): out += "[\"r\",\(id)]"
            case .restored(let stroke):
                out += "[\"R\",{\"id\":\(stroke.id),\"owner\":\(quoted(stroke.owner)),\"touch\":\(stroke.touch),\"rgba\":\(stroke.rgba),\"w\":\(stroke.w),"
                if let position = stroke.pos { out += "\"pos\":\(position)," }
                out += "\"s\":"
                append(stroke.s, to: &out)
                out += ",\"p\":"
                append(stroke.p, to: &out)
                out += "}]"
            }
        }
        out += "]"
        if let hubTime = batch.hubTime { out += ",\(hubTime)" }
        out += "]"
        return out
    }

    static func append(_ integers: [Int64], to out: inout String) {
        out += "["
        for (index, value) in integers.enumerated() {
            if index > 0 { out += "," }
            out += String(value)
        }
        out += "]"
    }

    /// A whole board: accepted strokes in their order, then the strokes in progress.
    public static func snapshot(_ board: BoardState, kind: String = "snapshot") -> String {
        var out = "{\"t\":\"\(kind)\",\"seq\":\(board.sequence),\"accepted\":["
        for (index, stroke) in board.acceptedStrokes.enumerated() {
            if index > 0 { out += "," }
            append(stroke, to: &out)
        }
        out += "],\"active\":["
        for (index, stroke) in board.orderedActiveStrokes.enumerated() {
            if index > 0 { out += "," }
            append(stroke, to: &out)
        }
        out += "]}"
        return out
    }

    static func append(_ diff: StrokeDiff, to out: inout String) {
        switch diff {
        case .began(let id, let owner, let touch, let style):
            out += "[\"b\",\(id.rawValue),\(quoted(owner.rawValue)),\(touch),\(style.rgba),\(style.width)]"
        case .appended(let id, let offset, let samples):
            out += "[\"a\",\(id.rawValue),\(offset),"
            append(samples, from: nil, to: &out)
            out += "]"
        case .predicted(let id, let samples):
            out += "[\"p\",\(id.rawValue),"
            append(samples, from: nil, to: &out)
            out += "]"
        case .amended(let id, let offset, let sample):
            out += "[\"m\",\(id.rawValue),\(offset),"
            append([sample], from: nil, to: &out)
            out += "]"
        case .accepted(let id, let position):
            out += "[\"A\",\(id.rawValue),\(position)]"
        case .cancelled(let id):
            out += "[\"c\",\(id.rawValue)]"
        case .cleared(let owner):
            out += "[\"C\",\(owner.map { quoted($0.rawValue) } ?? "null")]"
        case .removed(let id):
            out += "[\"r\",\(id.rawValue)]"
        case .restored(let stroke):
            out += "[\"R\","
            append(stroke, to: &out)
            out += "]"
        }
    }

    static func append(_ stroke: Stroke, to out: inout String) {
        out += "{\"id\":\(stroke.id.rawValue),\"owner\":\(quoted(stroke.owner.rawValue)),\"touch\":\(stroke.touch),"
        out += "\"rgba\":\(stroke.style.rgba),\"w\":\(stroke.style.width),"
        if let position = stroke.acceptedPosition { out += "\"pos\":\(position)," }
        out += "\"s\":"
        append(stroke.samples, from: nil, to: &out)
        out += ",\"p\":"
        append(stroke.predicted, from: stroke.samples.last, to: &out)
        out += "}"
    }

    /// Four integers per sample: x, y, t as deltas from the previous sample
    /// (the first from `base`, or absolute without one), force (0: none).
    static func append<Samples: Sequence<Sample>>(_ samples: Samples, from base: Sample?, to out: inout String) {
        out += "["
        var x = Int64(base?.x ?? 0)
        var y = Int64(base?.y ?? 0)
        var t = base?.time ?? 0
        for (index, sample) in samples.enumerated() {
            if index > 0 { out += "," }
            let force = sample.flags.contains(.hasForce) ? Int(sample.force) : 0
            out += "\(Int64(sample.x) - x),\(Int64(sample.y) - y),\(sample.time - t),\(force)"
            x = Int64(sample.x)
            y = Int64(sample.y)
            t = sample.time
        }
        out += "]"
    }

    /// A JSON string literal.
    public static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
