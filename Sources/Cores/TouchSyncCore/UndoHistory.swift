/// Undo, redo and erase on a board (the whiteboard's toolbar).
///
/// Undo removes the user's most recent accepted stroke still on the board;
/// redo puts the most recently undone one back at its original place in the
/// acceptance order; a new accepted stroke of the user, or a clear, ends what
/// can be redone. The redo stacks are the hub's memory, not part of the
/// board: a redo's diff carries the whole stroke, so replicas (and late
/// joiners) need nothing of it, and digests do not cover it. They live as
/// long as the hub process (a restart forgets them; undo still works).
public struct UndoHistory: Sendable {
    /// Strokes one user can redo, at most (older ones are forgotten).
    public static let depth = 64
    private var undone: [UserNamespace: [Stroke]] = [:]

    public init() {}

    /// Whether `user` has something to redo.
    public func canRedo(_ user: UserNamespace) -> Bool { !(undone[user]?.isEmpty ?? true) }

    /// Removes `user`'s most recent accepted stroke; false when it has none on the board.
    @discardableResult
    public mutating func undo(by user: UserNamespace, on board: inout BoardState, into diffs: inout [StrokeDiff]) -> Bool {
        guard let stroke = board.acceptedStrokes.last(where: { $0.owner == user }) else { return false }
        board.emit(.removed(stroke.id), into: &diffs)
        undone[user, default: []].append(stroke)
        if undone[user]!.count > Self.depth { undone[user]!.removeFirst() }
        return true
    }

    /// Puts back `user`'s most recently undone stroke; false when there is none.
    @discardableResult
    public mutating func redo(by user: UserNamespace, on board: inout BoardState, into diffs: inout [StrokeDiff]) -> Bool {
        guard let stroke = undone[user]?.popLast() else { return false }
        board.emit(.restored(stroke), into: &diffs)
        return true
    }

    /// What `diffs` (just applied) mean for redo: a user who accepted a new
    /// stroke can no longer redo; a clear ends redo for those it cleared.
    public mutating func note(_ diffs: some Sequence<StrokeDiff>, on board: BoardState) {
        guard !undone.isEmpty else { return }
        for diff in diffs {
            switch diff {
            case .accepted(let id, _):
                if let owner = board.acceptedStrokes.last(where: { $0.id == id })?.owner { undone[owner] = nil }
            case .cleared(let owner):
                if let owner { undone[owner] = nil } else { undone.removeAll() }
            default:
                continue
            }
        }
    }
}

extension BoardState {
    /// Most accepted strokes one erase may name.
    public static let maxErasedStrokes = 1024

    /// Removes accepted strokes by id: `user`'s own, or anyone's when
    /// `anyOwner` (a user allowed to clear the board). Validated whole first:
    /// an id that is not an accepted stroke, or is named twice, refuses it all.
    public mutating func erase(
        _ ids: [StrokeID], by user: UserNamespace, anyOwner: Bool, into diffs: inout [StrokeDiff]
    ) throws(TouchInputError) {
        guard ids.count <= Self.maxErasedStrokes else { throw .frameTooLarge("strokes in one erase", limit: Self.maxErasedStrokes) }
        var seen = Set<StrokeID>()
        for id in ids {
            guard seen.insert(id).inserted, let stroke = acceptedStrokes.first(where: { $0.id == id }) else {
                throw .unknownStroke(id)
            }
            guard anyOwner || stroke.owner == user else { throw .notYours(id) }
        }
        for id in ids { emit(.removed(id), into: &diffs) }
    }
}
