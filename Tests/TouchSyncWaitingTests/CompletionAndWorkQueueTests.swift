import Foundation
import Synchronization
import Testing
import TouchSyncWaiting

/// The one-value and the work-queue waits: a waiter is woken by what another
/// thread does (no polling), only the first completion counts, and a
/// cancelled waiter returns at once, whether it was cancelled before or
/// while it waited. Time limits are the only bound: nothing else ends these
/// waits.
@Suite("Completion and WorkQueue", .timeLimit(.minutes(3)))
struct CompletionAndWorkQueueTests {
    @Test func everyWaiterGetsTheFirstValue() async {
        let completion = Completion<Int>()
        #expect(completion.value == nil)
        async let first = completion.wait()
        async let second = completion.join()
        // From another thread, twice: the second does not count.
        let other = Thread {
            #expect(completion.complete(7))
            #expect(!completion.complete(8))
        }
        other.start()
        #expect(await first == 7)
        #expect(await second == 7)
        #expect(await completion.wait() == 7, "a late waiter gets it at once")
        #expect(completion.value == 7)
    }

    @Test func aCancelledWaiterReturnsNilAndJoinDoesNot() async {
        let completion = Completion<String>()
        let waiting = Task { await completion.wait() }
        let joining = Task { await completion.join() }
        waiting.cancel()
        #expect(await waiting.value == nil, "cancelled while it waited")
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await completion.wait()
        }
        #expect(await early.value == nil, "cancelled before it waited")
        joining.cancel()
        completion.complete("done")
        #expect(await joining.value == "done", "join waits for the value whatever its task does")
    }

    @Test func theConsumerTakesWhatWasPostedAndStopsWhenCancelled() async {
        let queue = WorkQueue<[Int]>([])
        let consumer = Task { () -> [[Int]] in
            var batches: [[Int]] = []
            while let batch = await queue.next({ items -> [Int]? in
                guard !items.isEmpty else { return nil }
                defer { items.removeAll() }
                return items
            }) {
                batches.append(batch)
                if batches.joined().count == 100 { break }
            }
            return batches
        }
        let producer = Thread {
            for item in 0..<100 { queue.post { $0.append(item) } }
        }
        producer.start()
        let batches = await consumer.value
        #expect(Array(batches.joined()) == Array(0..<100), "everything once, in order")
        // A consumer asleep on an empty queue returns nil when cancelled.
        let sleeper = Task { await queue.next { items -> Int? in items.popLast() } }
        sleeper.cancel()
        #expect(await sleeper.value == nil)
    }
}
