import Logging
import TouchSyncCore
import TouchSyncHubCore
import TouchSyncJournal
import TouchSyncStore
import TouchSyncWire
import ZeroMQ

// HubLoop: what the journal thread and the board store report, and the
// publications and snapshots they release.
extension HubLoop {
    /// The journal thread's reports of one round, in order: failures and
    /// restarts, then its progress, which lets out the publications waiting
    /// for it (written; synced under `--fsync batch`) before the core acknowledges.
    func journalReported(_ events: [HubEvent]) {
        for event in events {
            if case .journalProgress(let written, let synced) = event {
                send(held.release(through: configuration.journal?.fsync == .everyBatch ? synced : written))
            }
            handle(event)
        }
    }

    func send(_ released: [HeldOutput]) {
        for output in released {
            switch output {
            case .publication(let publication):
                send(publication)
            case .snapshot(let peer, let requestID, let board, let state, let digest):
                sendSnapshot(to: peer, requestID: requestID, board: board, state: state, digest: digest)
            }
        }
    }

    /// The store's reports, in order: failures and moves before the commit
    /// that acknowledges; then what the commit lets out is published (a
    /// batch of a board whose commit failed never is: its subscribers resync).
    func storeReported(_ reports: [BoardStoreReport]) {
        for report in reports {
            switch report {
            case .failed(let board, let reason):
                // Reads fenced for a board served here; a claim or look-up that failed leaves nothing
                // here to fence (its requests are told to ask again, and the next one claims afresh).
                if core.board(board) != nil { held.broken.insert(board) }
                handle(.journalFailed(board: board, reason: reason))
            case .moved(let board, let owner):
                held.broken.insert(board)
                handle(.boardMoved(board: board, owner: owner))
            case .restored(let board):
                held.broken.remove(board)
                handle(.journalRestored(board: board))
            case .committed(let ticket):
                send(held.release(through: ticket))
                handle(.journalProgress(writtenThrough: ticket, syncedThrough: ticket))
            case .adopted(let board):
                held.broken.remove(board.name)
                handle(.boardAdopted(board))
            case .membership(let hubs):
                handle(.membershipChanged(hubs))
            case .absent(let board):
                handle(.boardAbsent(board: board))
            }
        }
    }
}
