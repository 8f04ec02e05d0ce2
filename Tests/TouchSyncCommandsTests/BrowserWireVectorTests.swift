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
        var sample: [Double?]
        var x: Int32?, y: Int32?, time: Int64?
        var force: UInt16?, azimuth: Int16?, altitude: Int16?
        var error: String?
    }

    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto/conformance/v1/browser-samples.json")

    @Test func theGatewayMatchesTheVectors() throws {
        let vectors = try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: Self.file))
        #expect(vectors.cases.count >= 15)
        for vector in vectors.cases {
            switch Result(catching: { () throws(BrowserWireError) in try TabSamples.fixedPoint([vector.sample]) }) {
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
