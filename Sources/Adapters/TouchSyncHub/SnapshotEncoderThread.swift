import Foundation
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncWire
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// Snapshots encoded on a thread of their own, so that a burst of late
/// joiners (or of requesters who never read) does not stall the hub thread,
/// which then takes the agents' frames in the meantime (issue 40: 20
/// snapshots admitted in one turn held every agent's frames for as long as
/// 20 encodings took).
///
/// The hub thread keeps the snapshot socket: it posts a job (the board's
/// state as a value, which costs a reference, not a copy), and this thread
/// encodes the chunks and hands each back once the next is written (so the
/// last is known as last; `report`, on this thread): a large board's chunks
/// travel while the rest are written. Jobs are taken in order.
final class SnapshotEncoderThread: Sendable {
    struct Job: Sendable {
        let key: SnapshotJobKey
        let board: String
        let state: BoardState
        let digest: BoardDigest
        let samplesPerChunk: Int
        let packedSamples: Bool
    }

    /// nil: stop.
    private let jobs: Mailbox<Job?>
    private let thread = SocketThread(name: "touchsync-snap")
    private let ended = DispatchSemaphore(value: 0)

    /// Starts the thread; `report` gets each encoded chunk, in order, on it.
    init(report: @escaping @Sendable (EncodedSnapshotChunk) -> Void) throws(ZMQError) {
        let jobs = try Mailbox<Job?>()
        self.jobs = jobs
        thread.start { [jobs, ended] in
            encoding: while true {
                let queued = jobs.drain()
                if queued.isEmpty {
                    var entry = pollfd(fd: jobs.fileDescriptor, events: Int16(POLLIN), revents: 0)
                    _ = poll(&entry, 1, -1)
                    continue
                }
                if queued.contains(where: { $0 == nil }) { break encoding }  // stopping: what waits is dropped
                for case let job? in queued {
                    var produced: [UInt8]? = nil
                    SnapshotCodec.encodeReplies(
                        of: job.state.snapshot(), board: job.board, digest: job.digest, requestID: job.key.requestID,
                        samplesPerChunk: job.samplesPerChunk, packedSamples: job.packedSamples
                    ) { chunk in
                        // One chunk behind: the last one is known to be last when it is handed over.
                        if let produced { report(EncodedSnapshotChunk(key: job.key, bytes: produced, last: false)) }
                        produced = chunk
                        return true
                    }
                    report(EncodedSnapshotChunk(key: job.key, bytes: produced ?? [], last: true))
                }
            }
            _ = jobs.close()
            ended.signal()
        }
    }

    /// Queues `job` (never blocks). False once the thread has stopped.
    @discardableResult
    func post(_ job: Job) -> Bool { jobs.post(job) }

    /// Drops what is queued and ends the thread once its current round is
    /// encoded. Blocks: for the hub loop's own thread, never a task.
    func stop() {
        guard jobs.post(nil) else { return }  // stopped already
        ended.wait()
    }
}

/// Which request a snapshot answers.
struct SnapshotJobKey: Hashable, Sendable {
    let peer: PeerID
    let requestID: UInt64
}

/// One encoded chunk of a snapshot reply (`last`: the job is done; its
/// bytes may be empty only when the codec wrote nothing).
struct EncodedSnapshotChunk: Sendable {
    let key: SnapshotJobKey
    let bytes: [UInt8]
    let last: Bool
}
