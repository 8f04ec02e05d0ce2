import Foundation
import Testing
import TouchSyncCore
import TouchSyncWeb
import TouchSyncWebWire

/// proto/conformance/v1/browser-samples.json: what a tab's sample becomes in
/// the hub's fixed point (or why it is refused), checked against the gateway.
@Suite("Browser wire vectors")
struct BrowserWireVectorTests {
    struct Vectors: Decodable {
        var cases: [Case]
    }

    struct Case: Decodable {
        var note: String
        var x: Int32?, y: Int32?, time: Int64?
        var force: UInt16?, azimuth: Int16?, altitude: Int16?
        var error: String?
    }

    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto/conformance/v1/browser-samples.json")

    /// Each sample goes through the gateway's whole reading of a touch
    /// message (`BrowserMessage.decode`, then `TabSamples`), as a tab sends it.
    @Test func theGatewayMatchesTheVectors() throws {
        let data = try Data(contentsOf: Self.file)
        let vectors = try JSONDecoder().decode(Vectors.self, from: data)
        let raw = try #require((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["cases"] as? [[String: Any]])
        #expect(vectors.cases.count >= 17 && raw.count == vectors.cases.count)
        for (vector, rawCase) in zip(vectors.cases, raw) {
            let message = try JSONSerialization.data(withJSONObject: ["t": "touch", "n": 1, "phase": "began", "id": 1, "s": [rawCase["sample"]!]])
            let outcome: Result<[Sample], BrowserWireError>
            do {
                guard case .touch(let touch) = try BrowserMessage.decode(String(decoding: message, as: UTF8.self)) else {
                    Issue.record("\(vector.note): not a touch")
                    continue
                }
                outcome = Result { () throws(BrowserWireError) in try TabSamples.fixedPoint(touch.s ?? []) }
            } catch let refused as BrowserMessage.RefusedByNumber {
                #expect(refused.number == 1, "\(vector.note): refused, but not by its number")
                outcome = .failure(BrowserWireError(refused.code, refused.message))
            }
            switch outcome {
            case .success(let samples):
                #expect(vector.error == nil, "\(vector.note): accepted, expected \(vector.error ?? "")")
                guard let sample = samples.first, samples.count == 1 else {
                    Issue.record("\(vector.note): \(samples.count) samples")
                    continue
                }
                #expect(sample.x == vector.x && sample.y == vector.y && sample.time == vector.time, "\(vector.note): \(sample)")
                #expect(sample.flags.contains(.hasForce) == (vector.force != nil) && sample.force == (vector.force ?? 0), "\(vector.note): \(sample)")
                let angles = vector.azimuth != nil || vector.altitude != nil
                #expect(sample.flags.contains(.hasAngles) == angles, "\(vector.note): \(sample)")
                #expect(sample.azimuth == (vector.azimuth ?? 0) && sample.altitude == (vector.altitude ?? 0), "\(vector.note): \(sample)")
            case .failure(let error):
                #expect(error.code == vector.error, "\(vector.note): \(error)")
            }
        }
    }
}
