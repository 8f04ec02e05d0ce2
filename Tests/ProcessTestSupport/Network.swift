import Foundation
import Synchronization
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A plain HTTP GET on 127.0.0.1:`port`; the whole response body.
/// A TCP connection to 127.0.0.1:`port` (close it when done).
public func connectedSocket(port: UInt16) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { throw TestFailure("socket failed") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(descriptor)
        throw TestFailure("cannot connect to port \(port)")
    }
    return descriptor
}

/// The whole response to `request` (raw HTTP/1.1) until the server closes.
public func httpExchange(port: UInt16, _ request: String) throws -> String {
    let descriptor = try connectedSocket(port: port)
    defer { close(descriptor) }
    let bytes = Array(request.utf8)
    _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
    var response = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = recv(descriptor, &buffer, buffer.count, 0)
        if count <= 0 { break }
        response += buffer[0..<count]
    }
    return String(decoding: response, as: UTF8.self)
}

public func httpGet(port: UInt16, path: String, close closing: Bool = false) throws -> String {
    let text = try httpExchange(port: port, "GET \(path) HTTP/1.1\r\nHost: localhost\r\n\(closing ? "Connection: close\r\n" : "")\r\n")
    guard text.hasPrefix("HTTP/1.1 200"), let body = text.range(of: "\r\n\r\n") else { throw TestFailure("bad response: \(text.prefix(200))") }
    return String(text[body.upperBound...])
}


/// A plain TCP socket listening on 127.0.0.1:`port` (close it when done).
public func listeningSocket(port: UInt16) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    let bound = withLoopbackAddress(port: port) { bind(descriptor, $0, $1) == 0 }
    guard descriptor >= 0, bound, listen(descriptor, 16) == 0 else {
        close(descriptor)
        throw TestFailure("cannot listen on \(port): \(String(cString: strerror(errno)))")
    }
    return descriptor
}
