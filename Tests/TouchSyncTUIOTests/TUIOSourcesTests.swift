import Testing
import TouchSyncCore
import TouchSyncTUIO

/// The bridge's source rules on a manual clock: a silent source's touches
/// are cancelled only past the time-out, a source back after it starts its
/// numbering over, room for new sources is made from idle ones only, and the
/// next sweep is due when the oldest source with a touch down times out.
@Suite("TUIO sources (no I/O, a manual clock)")
struct TUIOSourcesTests {
    let start = ContinuousClock.now
    let limits = TUIOSources.Limits(width: 1000, height: 500, sourceTimeout: .seconds(5), maxSources: 3, maxSourcesPerAddress: 2, maxCursors: 20)

    func down(_ sequence: Int64, id: Int32 = 1) -> TUIOFrame {
        TUIOFrame(source: "pad", sequence: sequence, alive: [id], updates: [.init(id: id, x: 0.5, y: 0.5)])
    }
    func up(_ sequence: Int64) -> TUIOFrame { TUIOFrame(source: "pad", sequence: sequence, alive: [], updates: []) }

    func changes(_ outcome: TUIOSources.Outcome) -> [TouchChange]? {
        if case .applied(let changes, _, _, _, _) = outcome { changes } else { nil }
    }

    @Test func aSilentSourceIsCancelledOnlyPastTheTimeOut() {
        var sources = TUIOSources(limits: limits)
        let pad = TUIOSourceID(sender: "10.0.0.1:3333", name: "pad")
        #expect(sources.nextSweep == nil, "nothing down: no sweep due")
        let began = sources.frame(down(1), from: pad, arrival: 1, now: start)
        #expect(changes(began)?.map(\.phase) == [.began])
        #expect(sources.nextSweep == start + .seconds(5) + .milliseconds(1))
        // Still within the time-out: nothing happens (this is what the process test waited six seconds for).
        #expect(sources.sweep(asOf: start + .seconds(5)).isEmpty)
        let swept = sources.sweep(asOf: start + .seconds(5) + .milliseconds(1))
        #expect(swept.map(\.source) == [pad] && swept[0].cancelled.map(\.phase) == [.cancelled])
        #expect(sources.nextSweep == nil && sources.sweep(asOf: start + .seconds(60)).isEmpty, "cancelled once")
        // Back after the silence with a numbering from the start (a restarted tracker): taken.
        let again = sources.frame(down(1), from: pad, arrival: 70, now: start + .seconds(70))
        #expect(changes(again)?.map(\.phase) == [.began])
        // Within the time-out an old number is dropped as before.
        let stale = sources.frame(down(1), from: pad, arrival: 71, now: start + .seconds(71))
        if case .dropped = stale {} else { Issue.record("a repeated frame number within the time-out is dropped: \(stale)") }
    }

    @Test func roomForNewSourcesComesOnlyFromIdleOnes() {
        var sources = TUIOSources(limits: limits)
        let a1 = TUIOSourceID(sender: "10.0.0.1:1", name: nil)
        let a2 = TUIOSourceID(sender: "10.0.0.1:2", name: nil)
        let a3 = TUIOSourceID(sender: "10.0.0.1:3", name: nil)
        _ = sources.frame(down(1), from: a1, arrival: 1, now: start)
        _ = sources.frame(up(1), from: a2, arrival: 1, now: start)
        // A third source from the same address: its address is full, nobody idle long enough.
        if case .refused(addressFull: true) = sources.frame(up(1), from: a3, arrival: 1, now: start + .seconds(1)) {} else {
            Issue.record("the address's third source is refused")
        }
        // a2 (nothing down) silent past the time-out makes room; a1 (a touch down) never does.
        let later = sources.frame(up(1), from: a3, arrival: 10, now: start + .seconds(10))
        guard case .applied(_, _, let forgot, let new, _) = later else {
            Issue.record("a3 is taken once a2 is idle: \(later)")
            return
        }
        #expect(forgot == a2 && new && sources.count == 2)
        // The bridge's own maximum: a source from another address when three are held.
        _ = sources.frame(up(1), from: TUIOSourceID(sender: "10.0.0.2:1", name: nil), arrival: 11, now: start + .seconds(11))
        if case .refused(addressFull: false) = sources.frame(up(1), from: TUIOSourceID(sender: "10.0.0.3:1", name: nil), arrival: 11, now: start + .seconds(11)) {} else {
            Issue.record("a fourth source is refused while none is idle")
        }
    }
}
