import Foundation
import Testing
import TouchSyncCore

/// The error codes' names come from a table written out next to `ErrorCode`
/// (the browser wire sends them), and that table is docs/protocol.md's.
@Suite("Error code names")
struct ErrorNameTests {
    @Test func namesAreTheProtocolsTable() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/protocol.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        for code in ErrorCode.allCases {
            #expect(text.contains("| \(code.rawValue) | \(code.protocolName) |"), "\(code) is not \(code.protocolName) in docs/protocol.md")
        }
        #expect(Set(ErrorCode.allCases.map(\.protocolName)).count == ErrorCode.allCases.count)
        #expect(ErrorCode.internalError.protocolName == "INTERNAL", "not derived from the case name")
    }
}
