import Testing
@testable import TouchSyncHub

/// The part a hub's front puts before each request it passes to a board thread.
@Suite struct FrontOriginTests {
    @Test(arguments: [
        FrontOrigin(descriptor: 17, user: "alice", address: "10.0.0.1"),
        FrontOrigin(descriptor: nil, user: nil, address: nil),
        FrontOrigin(descriptor: 0, user: "web:ann:tab-3", address: nil),
        FrontOrigin(descriptor: nil, user: nil, address: "::1"),
        FrontOrigin(descriptor: 9, user: String(repeating: "é", count: 300), address: "192.168.1.20"),
    ])
    func anOriginReadsBackAsItWasWritten(origin: FrontOrigin) {
        #expect(origin.encoded.withUnsafeBytes(FrontOrigin.init(decoding:)) == origin)
    }

    @Test func aPartTooShortOrWithAUserPastItsEndIsNoOrigin() {
        #expect([UInt8]([0, 0, 0, 1, 0]).withUnsafeBytes(FrontOrigin.init(decoding:)) == nil)
        #expect([UInt8]([0, 0, 0, 1, 0, 9, 65]).withUnsafeBytes(FrontOrigin.init(decoding:)) == nil, "a user of 9 bytes in 1")
        #expect(FrontOrigin(descriptor: -5, address: nil).encoded.withUnsafeBytes(FrontOrigin.init(decoding:))?.descriptor == nil)
    }
}
