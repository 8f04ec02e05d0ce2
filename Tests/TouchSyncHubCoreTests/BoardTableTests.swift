import Testing
import TouchSyncCore
@testable import TouchSyncHubCore

/// The board table alone: slots, reuse, and which empty boards may be forgotten.
@Suite("BoardTable")
struct BoardTableTests {
    let start = Moment(nanoseconds: 0)  // the core's own time type

    @Test func slotsAreFoundByNameAndReusedOnceFree() {
        var table = BoardTable()
        let a = table.insert(BoardChannel(name: "a"), emptySince: nil)
        let b = table.insert(BoardChannel(name: "b"), emptySince: start)
        #expect(table.slot(of: "a") == a && table.slot(of: "b") == b && table.slot(of: "c") == nil)
        #expect(table.count == 2 && table.heldSlots == [a, b])
        table.remove(a)
        #expect(table.slot(of: "a") == nil && table.count == 1 && table.heldSlots == [b])
        let c = table.insert(BoardChannel(name: "c"), emptySince: nil)
        #expect(c == a)  // the free slot first
        #expect(table[c].name == "c" && table.slotsByName == ["b": b, "c": c])
    }

    @Test func onlyIdleUnwantedEmptyBoardsAreForgotten() throws {
        var table = BoardTable()
        let idle = table.insert(BoardChannel(name: "idle"), emptySince: start)
        let watched = table.insert(BoardChannel(name: "watched"), emptySince: start)
        let drawn = table.insert(BoardChannel(name: "drawn"), emptySince: start)
        let held = table.insert(BoardChannel(name: "held"), emptySince: nil)
        try table[drawn].reduce(
            TouchFrame(changes: [TouchChange(touch: TouchID(1), phase: .began, samples: [Sample(x: 1, y: 1, time: 1)])]),
            from: UserNamespace("ann"), style: .default)
        _ = table[drawn].sealBatch(hubTime: 1)
        #expect(table.mayForgetEmptyBoards)
        let early = table.idleEmptyBoards(now: start + .seconds(5), timeout: .seconds(10)) { _, _ in false }
        #expect(early.isEmpty)
        let due = table.idleEmptyBoards(now: start + .seconds(10), timeout: .seconds(10)) { slot, _ in slot == watched }
        #expect(due == [idle])
        #expect(!due.contains(held))
        for slot in due { table.remove(slot) }
        // The watched board is idle again from then; the drawn one is a board for good.
        let later = table.idleEmptyBoards(now: start + .seconds(19), timeout: .seconds(10)) { _, _ in false }
        #expect(later.isEmpty)
        let last = table.idleEmptyBoards(now: start + .seconds(20), timeout: .seconds(10)) { _, _ in false }
        #expect(last == [watched])
    }
}
