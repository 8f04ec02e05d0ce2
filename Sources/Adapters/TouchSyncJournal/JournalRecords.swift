import Foundation
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire

extension AgentProgress {
    init(_ proto: Touchsync_V1_AgentProgress) {
        self.init(
            principal: UserNamespace(String(decoding: proto.routingID, as: UTF8.self)), appliedThrough: proto.appliedThrough,
            style: StrokeStyle(proto.style), sessionID: Array(proto.sessionID))
    }

    var proto: Touchsync_V1_AgentProgress {
        var proto = Touchsync_V1_AgentProgress()
        proto.routingID = .init(principal.rawValue.utf8)
        proto.sessionID = .init(sessionID)
        proto.appliedThrough = appliedThrough
        proto.style = style.proto
        return proto
    }
}

/// One decoded journal record.
package enum JournalEntry {
    case checkpoint(state: BoardState, hubTime: Int64, agents: [AgentProgress])
    case batch(Touchsync_V1_DiffBatch, agents: [AgentProgress])
}

package enum JournalRecordCodec {
    /// A batch record, wrapping the batch's already encoded bytes (no second encoding).
    package static func batchPayload(encodedBatch: [UInt8], agents: [AgentProgress]) -> [UInt8] {
        var out = ProtoWriter(capacity: batchPayloadCapacity(encodedBatch: encodedBatch, agents: agents))
        writeBatchPayload(encodedBatch: encodedBatch, agents: agents, into: &out)
        return out.bytes
    }

    /// Room for `writeBatchPayload` (a bound, not the size).
    static func batchPayloadCapacity(encodedBatch: [UInt8], agents: [AgentProgress]) -> Int {
        agents.reduce(encodedBatch.count + 16) { $0 + $1.principal.rawValue.utf8.count + $1.sessionID.count + 40 }
    }

    /// `JournalRecord.batch` after what `out` holds, written straight from the
    /// values, byte for byte as SwiftProtobuf writes the message
    /// (`aBatchRecordIsWrittenAsSwiftProtobufWritesIt`). Every length is
    /// known before it is written, so nothing is moved or copied but the
    /// batch's bytes: each agent's progress went through a SwiftProtobuf
    /// message of its own, for every batch the hub journals.
    static func writeBatchPayload(encodedBatch: [UInt8], agents: [AgentProgress], into out: inout ProtoWriter) {
        func fieldSize(_ length: Int) -> Int { 1 + ProtoWriter.varintSize(UInt64(length)) + length }
        func styleSize(_ style: StrokeStyle) -> Int {
            (style.rgba != 0 ? 5 : 0) + (style.width != 0 ? 1 + ProtoWriter.varintSize(UInt64(style.width)) : 0)
        }
        func progressSize(_ agent: AgentProgress) -> Int {
            let name = agent.principal.rawValue.utf8.count
            return (name > 0 ? fieldSize(name) : 0)
                + (agent.appliedThrough != 0 ? 1 + ProtoWriter.varintSize(agent.appliedThrough) : 0)
                + fieldSize(styleSize(agent.style))  // set, so written even when empty
                + (agent.sessionID.isEmpty ? 0 : fieldSize(agent.sessionID.count))
        }
        out.lengthDelimitedHeader(1, length: agents.reduce(fieldSize(encodedBatch.count)) { $0 + fieldSize(progressSize($1)) })  // JournalRecord.batch
        out.bytesField(1, encodedBatch)  // JournalBatch.batch
        for agent in agents {
            out.lengthDelimitedHeader(2, length: progressSize(agent))  // JournalBatch.agents
            out.stringField(1, agent.principal.rawValue)  // AgentProgress.routing_id (its UTF-8 bytes)
            out.uint64Field(2, agent.appliedThrough)  // AgentProgress.applied_through
            out.lengthDelimitedHeader(3, length: styleSize(agent.style))  // AgentProgress.style
            out.fixed32Field(1, agent.style.rgba)
            out.uint64Field(2, UInt64(agent.style.width))
            if !agent.sessionID.isEmpty { out.bytesField(4, agent.sessionID) }  // AgentProgress.session_id
        }
    }

    package static func checkpointPayload(state: BoardState, board: String, hubTime: Int64, agents: [AgentProgress]) -> [UInt8] {
        var checkpoint = Touchsync_V1_JournalCheckpoint()
        checkpoint.hubTime = hubTime
        checkpoint.chunks = SnapshotCodec.chunks(of: state.snapshot(), board: board, digest: state.digest)
        checkpoint.agents = agents.map(\.proto)
        var record = Touchsync_V1_JournalRecord()
        record.checkpoint = checkpoint
        return WireCodec.encode(record)
    }

    /// Decodes the record whose payload is `bytes[payload]` (a range from `SegmentFormat.scan`).
    static func decode(_ bytes: [UInt8], payload: Range<Int>, limits: BoardLimits) throws(JournalError) -> JournalEntry {
        let decoded = bytes.withUnsafeBytes { raw in
            Result { () throws(JournalError) in try decode(UnsafeRawBufferPointer(rebasing: raw[payload]), limits: limits) }
        }
        return try decoded.get()
    }

    /// Decodes and checks one record's payload; a checkpoint must load into a
    /// state with the digest it recorded.
    package static func decode(_ payload: UnsafeRawBufferPointer, limits: BoardLimits) throws(JournalError) -> JournalEntry {
        let record: Touchsync_V1_JournalRecord
        do {
            record = try WireCodec.decode(Touchsync_V1_JournalRecord.self, from: payload)
        } catch {
            throw .unreadable("a record with a good checksum does not decode: \(error)")
        }
        switch record.body {
        case .batch(let batch):
            return .batch(batch.batch, agents: batch.agents.map(AgentProgress.init))
        case .checkpoint(let checkpoint):
            do {
                let (snapshot, digest) = try SnapshotCodec.assemble(checkpoint.chunks)
                let state = try BoardState(snapshot: snapshot, limits: limits)
                guard state.digest == digest else {
                    throw JournalError.unreadable("a checkpoint at sequence \(snapshot.sequence) loads to a different digest")
                }
                return .checkpoint(state: state, hubTime: checkpoint.hubTime, agents: checkpoint.agents.map(AgentProgress.init))
            } catch let error as JournalError {
                throw error
            } catch {
                throw .unreadable("a checkpoint does not load: \(error)")
            }
        case nil:
            throw .unreadable("a record with no body")
        }
    }
}

/// Board names are any UTF-8 up to 128 bytes (no control characters); a
/// board's folder name keeps letters, digits, `-` and `_` and writes every
/// other byte as `%XX`, so no name can climb out of the data folder or
/// collide with another, and a name too long for that goes as base64url.
public enum BoardFolderName {
    /// The longest folder name written: below NAME_MAX (255 bytes), with room to spare.
    public static let maxLength = 240

    /// The folder of `board`: its name percent-encoded (readable for the usual
    /// names), or, when that would not fit a file name (a valid 128-byte name of
    /// punctuation or non-ASCII letters percent-encodes to up to 384
    /// characters), `~` and the name's UTF-8 in unpadded base64url (at most
    /// 172 characters). `~` never starts a percent-encoded name (it is `%7E`).
    public static func encode(_ board: String) -> String {
        let readable = percentEncoded(board)
        guard readable.utf8.count > maxLength else { return readable }
        return "~" + Data(board.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    private static func percentEncoded(_ board: String) -> String {
        var name = ""
        for byte in board.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                name.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                name += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return name
    }

    public static func decode(_ name: String) -> String? {
        if name.hasPrefix("~") {
            var base64 = name.dropFirst().replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
            guard let data = Data(base64Encoded: base64) else { return nil }
            return String(validating: Array(data), as: UTF8.self)
        }
        var bytes: [UInt8] = []
        var utf8 = name.utf8[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
