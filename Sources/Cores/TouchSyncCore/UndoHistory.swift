/// Undo, redo and erase on a board (the whiteboard's toolbar).
///
/// Undo takes the user's latest operation still on the board: their most
/// recent accepted stroke, or their latest edit (`StrokeEdit`) when that came
/// after it; redo does the most recently undone one again (a stroke at its
/// original place in the acceptance order, an edit once more). A new
/// accepted stroke or edit of the user, or a clear, ends what can be redone;
/// a clear also ends what edits can be undone. The stacks are the hub's
/// memory, not part of the board: an undo's or redo's diffs carry whole
/// strokes, so replicas (and late joiners) need nothing of them, and digests
/// do not cover them. They live as long as the hub process (a restart
/// forgets them; undoing strokes still works).
public struct UndoHistory: Sendable {
    /// Operations one user can undo as edits, or redo, at most (older ones are forgotten).
    public static let depth = 64

    /// What one undo took away, to redo.
    enum Undone: Sendable {
        case stroke(Stroke)
        case edit(EditRecord)
    }

    private var undone: [UserNamespace: [Undone]] = [:]
    private var edits: [UserNamespace: [EditRecord]] = [:]

    public init() {}

    /// Whether `user` has something to redo.
    public func canRedo(_ user: UserNamespace) -> Bool { !(undone[user]?.isEmpty ?? true) }

    /// Makes `edit`, remembered for `user`'s undo; it ends what they can redo.
    public mutating func edit(
        _ edit: StrokeEdit, by user: UserNamespace, anyOwner: Bool, on board: inout BoardState, into diffs: inout [StrokeDiff]
    ) throws(TouchInputError) {
        let record = try board.edit(edit, by: user, anyOwner: anyOwner, into: &diffs)
        undone[user] = nil
        push(record, for: user)
    }

    /// Takes back `user`'s latest stroke or edit; false when there is none.
    @discardableResult
    public mutating func undo(by user: UserNamespace, on board: inout BoardState, into diffs: inout [StrokeDiff]) -> Bool {
        let stroke = board.acceptedStrokes.last(where: { $0.owner == user })
        if let edit = edits[user]?.last, stroke.map({ $0.acceptedPosition! < edit.mark }) ?? true {
            edits[user]!.removeLast()
            remember(.edit(board.revert(edit, into: &diffs)), for: user)
            return true
        }
        guard let stroke else { return false }
        board.emit(.removed(stroke.id), into: &diffs)
        remember(.stroke(stroke), for: user)
        return true
    }

    /// Does `user`'s most recently undone stroke or edit again; false when there is none.
    @discardableResult
    public mutating func redo(by user: UserNamespace, on board: inout BoardState, into diffs: inout [StrokeDiff]) -> Bool {
        switch undone[user]?.popLast() {
        case .stroke(let stroke):
            board.emit(.restored(stroke), into: &diffs)
        case .edit(let inverse):
            push(board.revert(inverse, into: &diffs), for: user)
        case nil:
            return false
        }
        return true
    }

    /// What `diffs` (just applied) mean for redo: a user who accepted a new
    /// stroke can no longer redo; a clear ends redo for those it cleared, and
    /// every edit's undo (an edit may name anyone's strokes).
    public mutating func note(_ diffs: some Sequence<StrokeDiff>, on board: BoardState) {
        guard !undone.isEmpty || !edits.isEmpty else { return }
        for diff in diffs {
            switch diff {
            case .accepted(let id, _):
                if let owner = board.acceptedStrokes.last(where: { $0.id == id })?.owner { undone[owner] = nil }
            case .cleared(let owner):
                if let owner { undone[owner] = nil } else { undone.removeAll() }
                edits.removeAll()
            default:
                continue
            }
        }
    }

    private mutating func push(_ record: EditRecord, for user: UserNamespace) {
        edits[user, default: []].append(record)
        if edits[user]!.count > Self.depth { edits[user]!.removeFirst() }
    }

    private mutating func remember(_ entry: Undone, for user: UserNamespace) {
        undone[user, default: []].append(entry)
        if undone[user]!.count > Self.depth { undone[user]!.removeFirst() }
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
