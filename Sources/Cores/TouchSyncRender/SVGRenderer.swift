import TouchSyncCore

/// Draws a board as SVG, the way the seed app draws its view: accepted
/// strokes solid in board order, strokes in progress at half opacity on top
/// (their predicted tails fainter still), and a light gray spot, 100 points
/// across, under each live touch. Strokes are filled ink outlines whose
/// width follows pressure (`InkOutline`, the outlines the browser page
/// draws), so an export looks like the screen. Pure: no I/O.
public struct BoardRenderer: Sendable {
    /// The canvas in points. Default nil: fit every sample and spot, with `margin`.
    public var canvas: (width: Double, height: Double)? = nil
    /// Space around the content when fitting. Default 20 points.
    public var margin = 20.0
    /// The page colour (any SVG colour). Default white.
    public var background = "white"
    /// A caption in a band of its own above the drawing (board, sequence,
    /// time…), so it never covers a stroke. Default none.
    public var caption: String? = nil
    /// Height of the caption's band, in points.
    public static let captionBand = 28.0
    /// Diameter of a live touch's spot, in points (the seed's `TouchSpotView`: 100).
    public var spotDiameter = 100.0
    /// Opacity multiplier of strokes in progress (the seed: 0.5).
    public var inProgressOpacity = 0.5

    public init() {}

    public func svg(of state: BoardState) -> String {
        let unit = Double(Sample.unitsPerPoint)
        let active = state.orderedActiveStrokes
        let accepted = state.acceptedStrokes.sorted { ($0.acceptedPosition ?? 0) < ($1.acceptedPosition ?? 0) }
        let spots = state.touchSpots

        // The canvas: given, or the bounds of everything drawn.
        var minX = Double.infinity, minY = Double.infinity, maxX = -Double.infinity, maxY = -Double.infinity
        func include(_ x: Double, _ y: Double, _ radius: Double) {
            minX = Swift.min(minX, x - radius)
            minY = Swift.min(minY, y - radius)
            maxX = Swift.max(maxX, x + radius)
            maxY = Swift.max(maxY, y + radius)
        }
        for stroke in accepted + active {
            let radius = Double(stroke.style.width) / unit / 2 * (1 + InkOutline.thinning)  // the widest ink: pressure 1
            for sample in stroke.samples + stroke.predicted { include(Double(sample.x) / unit, Double(sample.y) / unit, radius) }
        }
        for spot in spots { include(Double(spot.x) / unit, Double(spot.y) / unit, spotDiameter / 2) }
        var origin: (x: Double, y: Double)
        var size: (width: Double, height: Double)
        if let canvas {
            origin = (0, 0)
            size = canvas
        } else if minX.isFinite {
            origin = (minX - margin, minY - margin)
            size = (maxX - minX + 2 * margin, maxY - minY + 2 * margin)
        } else {
            origin = (0, 0)
            size = (200, 100)
        }
        if caption != nil {
            origin.y -= Self.captionBand
            size.height += Self.captionBand
        }

        var out = ""
        out.reserveCapacity(4096 + state.storedSampleCount * 24)
        out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(number(size.width))\" height=\"\(number(size.height))\""
        out += " viewBox=\"\(number(origin.x)) \(number(origin.y)) \(number(size.width)) \(number(size.height))\">\n"
        out += "<rect x=\"\(number(origin.x))\" y=\"\(number(origin.y))\" width=\"100%\" height=\"100%\" fill=\"\(background)\"/>\n"
        // Spots first, so the strokes drawn over them stay visible.
        out += "<g id=\"touches\" fill=\"#d3d3d3\">\n"
        for spot in spots {
            out += "<circle data-owner=\"\(escape(spot.owner.rawValue))\" data-touch=\"\(spot.touch)\""
            out += " cx=\"\(number(Double(spot.x) / unit))\" cy=\"\(number(Double(spot.y) / unit))\" r=\"\(number(spotDiameter / 2))\"/>\n"
        }
        out += "</g>\n<g id=\"accepted\">\n"
        for stroke in accepted { path(Array(stroke.samples), stroke, opacity: 1, kind: "accepted", complete: true, into: &out) }
        out += "</g>\n<g id=\"in-progress\">\n"
        for stroke in active {
            path(Array(stroke.samples), stroke, opacity: inProgressOpacity, kind: "in-progress", complete: false, into: &out)
            if !stroke.predicted.isEmpty, let last = stroke.samples.last {
                path([last] + stroke.predicted, stroke, opacity: inProgressOpacity / 2, kind: "predicted", complete: false, into: &out)
            }
        }
        out += "</g>\n"
        if let caption {
            out += "<text x=\"\(number(origin.x + 8))\" y=\"\(number(origin.y + 18))\" font-family=\"sans-serif\" font-size=\"14\" fill=\"#555\">\(escape(caption))</text>\n"
        }
        out += "</svg>\n"
        return out
    }

    private func path(
        _ samples: [Sample], _ stroke: Stroke, opacity: Double, kind: String, complete: Bool, into out: inout String
    ) {
        guard !samples.isEmpty else { return }
        let rgba = stroke.style.rgba
        let colour = "#" + hex(rgba >> 8, digits: 6)
        let alpha = Double(rgba & 0xFF) / 255 * opacity
        let width = Double(stroke.style.width) / Double(Sample.unitsPerPoint)
        let outline = InkOutline.outline(InkOutline.points(samples), width: width, complete: complete)
        let d = InkOutline.pathData(outline)
        out += "<path data-stroke=\"\(stroke.id.rawValue)\" data-owner=\"\(escape(stroke.owner.rawValue))\" class=\"\(kind)\""
        out += " d=\"\(d)\" fill=\"\(colour)\" fill-opacity=\"\(number(alpha))\"/>\n"
    }
}

/// At most two decimals, no trailing zeros: compact and exact enough at 1/64 point.
func number(_ value: Double) -> String {
    let scaled = (value * 100).rounded()
    if scaled == scaled.rounded(.towardZero), abs(scaled) < 1e15 {
        let integer = Int64(scaled)
        let whole = integer / 100
        let fraction = abs(integer % 100)
        let sign = integer < 0 && whole == 0 ? "-" : ""
        if fraction == 0 { return sign + String(whole) }
        let digits = fraction % 10 == 0 ? String(fraction / 10) : (fraction < 10 ? "0" + String(fraction) : String(fraction))
        return sign + String(whole) + "." + digits
    }
    return String(value)
}

func hex(_ value: UInt32, digits: Int) -> String {
    let text = String(value, radix: 16)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
}

func escape(_ text: String) -> String {
    var out = ""
    for character in text {
        switch character {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        default: out.append(character)
        }
    }
    return out
}
