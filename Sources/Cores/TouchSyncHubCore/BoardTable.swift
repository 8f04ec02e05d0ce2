import TouchSyncCore

/// The boards a hub holds, by slot. A session keeps its board's slot, so a
/// frame reaches its board by array subscript (mutating a dictionary value
/// in place heap-allocates a coroutine frame each time); names are looked up
/// only on hellos, subscriptions and snapshot requests. A board drawn on is
/// never removed here (`maxBoards` bounds them); one a hello created and
/// nobody drew on is forgotten when idle, its slot reused.
struct BoardTable {
    private var channels: [BoardChannel] = []
    /// Slots of forgotten boards (their channel a nameless placeholder), reused first.
    private var freeSlots: [Int] = []
    private var slots: [String: Int] = [:]
    /// Boards created in this run and not drawn on yet, since when (or since last wanted).
    private var neverDrawn: [Int: Moment] = [:]

    subscript(slot: Int) -> BoardChannel {
        get { channels[slot] }
        _modify { yield &channels[slot] }
    }

    func slot(of board: String) -> Int? { slots[board] }

    /// Boards held now (forgotten ones not counted).
    var count: Int { channels.count - freeSlots.count }

    /// Every board held, by name (for board lists).
    var slotsByName: [String: Int] { slots }

    /// The slots of every board held, in slot order.
    var heldSlots: [Int] { channels.indices.filter { !channels[$0].name.isEmpty } }

    /// A board in a slot of its own; `emptySince`: created empty now (forgotten if nobody draws on it).
    mutating func insert(_ channel: BoardChannel, emptySince: Moment?) -> Int {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            channels[slot] = channel
        } else {
            slot = channels.count
            channels.append(channel)
        }
        slots[channel.name] = slot
        if let emptySince { neverDrawn[slot] = emptySince }
        return slot
    }

    /// Forgets the board in `slot`: its slot is free for another.
    mutating func remove(_ slot: Int) {
        slots[channels[slot].name] = nil
        channels[slot] = BoardChannel(name: "")
        neverDrawn[slot] = nil
        freeSlots.append(slot)
    }

    /// Some board was created empty and may be forgotten.
    var mayForgetEmptyBoards: Bool { !neverDrawn.isEmpty }

    /// The boards created empty, idle for `timeout` and neither `wanted`
    /// (given its slot and topic: an agent, a subscriber) nor holding pending
    /// diffs: the caller forgets them. A board drawn on leaves the list for
    /// good; a wanted one is idle from now.
    mutating func idleEmptyBoards(
        now: Moment, timeout: Duration, wanted: (_ slot: Int, _ topics: [[UInt8]]) -> Bool
    ) -> [Int] {
        var idle: [Int] = []
        for (slot, since) in neverDrawn {
            guard channels[slot].state.sequence == 0 else {
                neverDrawn[slot] = nil
                continue
            }
            guard now - since >= timeout else { continue }
            if wanted(slot, channels[slot].topics) || channels[slot].needsBatch {
                neverDrawn[slot] = now
                continue
            }
            idle.append(slot)
        }
        return idle.sorted()
    }
}
