/// The hub a follower (an agent or a subscriber) last left because it fell
/// silent, and when (issue 39). The live hubs keep naming a dead hub as a
/// board's owner until its lease lapses; following them back there costs
/// another silence time-out each time, so for twice the silence time-out the
/// follower passes that hub over and asks another shortly instead.
struct SilentHub<Key: Equatable & Sendable>: Sendable {
    let key: Key
    let since: ContinuousClock.Instant

    /// Whether the hub went silent within the last two silence time-outs.
    func isRecent(now: ContinuousClock.Instant, silenceTimeout: Duration) -> Bool { now - since < silenceTimeout * 2 }

    /// Whether `key` is that hub and it went silent lately.
    func covers(_ key: Key, now: ContinuousClock.Instant, silenceTimeout: Duration) -> Bool {
        self.key == key && isRecent(now: now, silenceTimeout: silenceTimeout)
    }
}
