import Testing
import TouchSyncWeb

/// Which peers' X-Forwarded-For the gateway believes, and the address a tab then counts as.
@Suite("Trusted proxies")
struct TrustedProxiesTests {
    @Test func rangesOfBothFamiliesMatchTheirAddressesOnly() throws {
        let proxies = try TrustedProxies(["10.1.0.0/16", "192.0.2.7", "fd00::/8"])
        #expect(proxies.contains("10.1.255.3") && !proxies.contains("10.2.0.1"))
        #expect(proxies.contains("192.0.2.7") && !proxies.contains("192.0.2.8"))
        #expect(proxies.contains("fd12::1") && !proxies.contains("fe80::1") && !proxies.contains("::ffff:10.1.0.1"))
        #expect(try TrustedProxies(["10.0.0.0/12"]).contains("10.15.1.1") && !(try TrustedProxies(["10.0.0.0/12"]).contains("10.16.0.0")))
        #expect(try TrustedProxies(["0.0.0.0/0"]).contains("8.8.8.8"))
        #expect(!TrustedProxies().contains("127.0.0.1"))
        for bad in ["10.0.0.0/33", "fd00::/129", "proxy.example", "10.0.0.0/-1", "10.0.0/8", ""] {
            #expect(throws: TrustedProxies.InvalidRange.self, "\(bad)") { try TrustedProxies([bad]) }
        }
    }

    @Test func theProxysLastEntryIsTheClientElseThePeer() throws {
        let proxies = try TrustedProxies(["127.0.0.1"])
        #expect(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "198.51.100.1, 203.0.113.5") == "203.0.113.5")
        #expect(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "2001:db8::7") == "2001:db8::7")
        #expect(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: nil) == "127.0.0.1")
        #expect(proxies.clientAddress(peer: "127.0.0.1", forwardedFor: "203.0.113.5, unknown") == "127.0.0.1", "not an address: the peer's")
        #expect(proxies.clientAddress(peer: "192.0.2.9", forwardedFor: "203.0.113.5") == "192.0.2.9", "not a trusted proxy: ignored")
    }
}
