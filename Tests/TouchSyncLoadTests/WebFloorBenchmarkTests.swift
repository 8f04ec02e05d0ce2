import Testing
import TouchSyncLoad

/// `touchsync bench --web-floor`: the bare fan-out that the gateway's CPU per
/// sample is compared with (docs/performance.md, "The browser path's floor").
@Suite("The browser path's floor", .timeLimit(.minutes(3)))
struct WebFloorBenchmarkTests {
    /// It reads every tab's messages and writes each board's samples once a
    /// period to each of its tabs, never once a message: with 20 tabs on two
    /// boards at 60 Hz and a 50 ms period, a board's ten tabs send 30
    /// messages a period, so a write carries many samples.
    @Test func aBoardsSamplesGoToItsTabsOnceAPeriod() async throws {
        var benchmark = WebFloorBenchmark()
        benchmark.tabs = 20
        benchmark.boardPeriod = .milliseconds(50)
        benchmark.warmUp = .milliseconds(300)
        benchmark.duration = .seconds(1)
        let result = try await benchmark.run()
        #expect(result.samples > 0)
        #expect(result.reads > 0 && result.reads <= result.samples)
        #expect(result.shortWrites == 0)
        // Each write goes to one tab of a board that had samples in the period: at most the tabs, once a period
        // (one more for a period that straddles the window's edges).
        let periods = (result.seconds / 0.05).rounded(.up) + 1
        #expect(result.writes > 0)
        #expect(Double(result.writes) <= periods * Double(benchmark.tabs), "\(result.writes) writes in \(periods) periods")
        // Never more samples than the tabs can have sent in the window (60 Hz each, a period of slack).
        #expect(Double(result.samples) <= (result.seconds + 0.1) * benchmark.hz * Double(benchmark.tabs))
        #expect(result.userSeconds >= 0 && result.systemSeconds >= 0)
    }
}
