import Testing
import TouchSyncStoreCore

/// Boards loaded ahead of their adoption: started once, kept while their
/// hub is suspected, taken once at adoption, dropped when it renews again.
@Suite("Board store: boards loaded ahead")
struct BoardPreloadsTests {
    @Test func aSuspectedBoardIsLoadedOnceAndTakenOnce() {
        var preloads = BoardPreloads<Int>()
        #expect(preloads.suspected(["b", "a"]) == ["a", "b"])
        #expect(preloads.suspected(["a", "b"]).isEmpty, "already loading: not started twice")
        preloads.loaded("a", 7)
        #expect(preloads.take("a") == 7)
        #expect(preloads.take("a") == nil, "taken once")
        #expect(preloads.take("b") == nil, "still loading: adopted whole")
        preloads.loaded("b", 9)
        #expect(preloads.count == 0, "a load that finishes after its board was adopted is not kept")
    }

    @Test func aHubThatRenewsAgainHasWhatWasLoadedForItDropped() {
        var preloads = BoardPreloads<Int>()
        _ = preloads.suspected(["a", "b"])
        preloads.loaded("a", 1)
        preloads.loaded("b", 2)
        #expect(preloads.suspected(["b", "c"]) == ["c"])
        #expect(preloads.count == 2)
        #expect(preloads.take("a") == nil, "no longer suspected: dropped")
        #expect(preloads.take("b") == 2)
        _ = preloads.suspected([])
        preloads.loaded("c", 3)
        #expect(preloads.count == 0)
    }

    @Test func aFailedLoadLeavesTheBoardToBeLoadedWholeOrTriedAgain() {
        var preloads = BoardPreloads<Int>()
        _ = preloads.suspected(["a"])
        preloads.loaded("a", nil)
        #expect(preloads.take("a") == nil)
        #expect(preloads.suspected(["a"]) == ["a"], "tried again at the next renewal")
    }
}
