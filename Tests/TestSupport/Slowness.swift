import Foundation

/// How much slower than an idle machine this run is (1 or more), as
/// `scripts/run-tests.sh` measured it before the run (the load average per
/// core, from other work on the machine) and passed in
/// `TOUCHSYNC_TEST_SLOWNESS`: waits for another process scale with it, so a
/// busy machine is given more time instead of failing (a time limit is not
/// what these tests assert).
public let testSlowness: Double = {
    guard let text = ProcessInfo.processInfo.environment["TOUCHSYNC_TEST_SLOWNESS"], let value = Double(text), value.isFinite else { return 1 }
    return min(8, max(1, value))
}()

/// `duration` on this machine: scaled by `testSlowness`.
public func scaled(_ duration: Duration) -> Duration { duration * testSlowness }
