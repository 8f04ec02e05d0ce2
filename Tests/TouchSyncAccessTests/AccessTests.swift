import Foundation
import Testing
import TouchSyncAccess
import ZeroMQ

@Suite("Access lists and key files")
struct AccessTests {
    static let keyA = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
    static let keyB = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

    @Test func theMostSpecificPatternDecides() throws {
        let list = try AccessList(users: [
            "alice": AccessEntry(key: Self.keyA, boards: ["*": .watch, "team-*": .draw, "team-lead": .admin]),
            "bob": AccessEntry(key: Self.keyB, boards: ["team-*": .draw]),
        ])
        #expect(list.role(of: "alice", on: "other") == .watch)
        #expect(list.role(of: "alice", on: "team-x") == .draw)
        #expect(list.role(of: "alice", on: "team-lead") == .admin)
        #expect(list.role(of: "bob", on: "team-x") == .draw)
        #expect(list.role(of: "bob", on: "other") == nil)
        #expect(list.role(of: "carol", on: "team-x") == nil)
        #expect(list.user(withKey: Self.keyB) == "bob")
        #expect(Role.watch < Role.draw && Role.draw < Role.admin)
    }

    @Test func badListsAreRefusedWithTheReason() {
        func refusal(_ json: String) -> String {
            do {
                _ = try AccessList(json: Data(json.utf8))
                return "accepted"
            } catch {
                return error.description
            }
        }
        #expect(refusal("{") .contains("not valid JSON"))
        #expect(refusal(#"{"users": {"a": {"key": "short", "boards": {"*": "draw"}}}}"#).contains("40 Z85"))
        #expect(refusal(#"{"users": {"a": {"key": "\#(Self.keyA)", "boards": {"*": "paint"}}}}"#).contains("paint"))
        #expect(refusal(#"{"users": {"a": {"key": "\#(Self.keyA)", "boards": {"t*x": "draw"}}}}"#).contains("pattern"))
        #expect(refusal(#"{"users": {"a b": {"key": "\#(Self.keyA)", "boards": {"*": "draw"}}}}"#).contains("user name"))
        #expect(
            refusal(#"{"users": {"a": {"key": "\#(Self.keyA)", "boards": {"*": "draw"}}, "b": {"key": "\#(Self.keyA)", "boards": {"*": "draw"}}}}"#)
                .contains("same key"))
        #expect(refusal(#"{"users": {}}"#) == "accepted")
    }

    @Test func aListSurvivesTheRoundTripThroughItsFile() throws {
        let folder = NSTemporaryDirectory() + "touchsync-access-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var list = try AccessList()
        try list.set("alice", AccessEntry(key: Self.keyA, boards: ["*": .draw]))
        try list.save(to: folder + "/access.json")
        #expect(try AccessList.load(from: folder + "/access.json") == list)
        #expect(throws: AccessListError.self) { try AccessList.load(from: folder + "/missing.json") }
    }

    @Test func keyFilesHoldThePairPrivatelyAndThePublicKeyAlone() throws {
        let folder = NSTemporaryDirectory() + "touchsync-keys-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let generated = try ZMQCurve.generateKeyPair()
        let pair = CurveKeyPair(publicKey: generated.publicKey, secretKey: generated.secretKey)
        try CurveKeyFiles.write(pair, name: "alice", directory: folder, force: false)
        let secretPath = CurveKeyFiles.secretPath(name: "alice", directory: folder)
        let mode = try FileManager.default.attributesOfItem(atPath: secretPath)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try CurveKeyFiles.readPair(secretPath) == pair)
        #expect(try CurveKeyFiles.readPublicKey(CurveKeyFiles.publicPath(name: "alice", directory: folder)) == pair.publicKey)
        #expect(try CurveKeyFiles.readPublicKey(secretPath) == pair.publicKey)
        #expect(try CurveKeyFiles.readPublicKey(pair.publicKey) == pair.publicKey)
        #expect(try ZMQCurve.publicKey(ofSecret: pair.secretKey) == pair.publicKey)
        #expect(throws: KeyFileError.exists(secretPath)) { try CurveKeyFiles.write(pair, name: "alice", directory: folder, force: false) }
        try CurveKeyFiles.write(pair, name: "alice", directory: folder, force: true)
        #expect(throws: KeyFileError.self) { try CurveKeyFiles.readPair(CurveKeyFiles.publicPath(name: "alice", directory: folder)) }
        #expect(throws: KeyFileError.missing(folder + "/nobody.key")) { try CurveKeyFiles.readPair(folder + "/nobody.key") }
    }

    /// The rendezvous weight as docs/protocol.md specifies it (vectors computed
    /// independently, in Python, from the text), and its use.
    @Test func clusterWeightsMatchTheSpecification() throws {
        #expect(ClusterMap.weight(hub: "a", board: "demo") == 0x54d0_4408_a00f_10f3)
        #expect(ClusterMap.weight(hub: "hub-c", board: "load-1-7") == 0x3255_3022_eaed_a265)
        #expect(ClusterMap.weight(hub: "b", board: "tafel-ü") == 0xf6f4_463b_38c1_00eb)
        let hubs = ["a", "b", "c"].map { ClusterMap.Hub(name: $0, ingest: "tcp://\($0):1", publish: "p", snapshot: "s") }
        let map = try ClusterMap(hubs: hubs)
        for board in ["demo", "x", "team-1"] {
            let best = hubs.max { ClusterMap.weight(hub: $0.name, board: board) < ClusterMap.weight(hub: $1.name, board: board) }!
            #expect(map.hub(for: board) == best)
        }
        #expect(throws: ClusterFileError.self) { try ClusterMap(hubs: []) }
        #expect(throws: ClusterFileError.self) { try ClusterMap(hubs: [hubs[0], hubs[0]]) }
    }
}
