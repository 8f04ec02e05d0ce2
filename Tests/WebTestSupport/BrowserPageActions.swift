import Foundation
import NIOPosix
import Synchronization
import TestSupport
import TouchSyncBrowser
import TouchSyncLoad
import TouchSyncWaiting
import TouchSyncWebWire

/// What a person does on the page, and what tests read from it.
extension BrowserPage {
    public func number(_ expression: String) async throws -> Double {
        let value = try await evaluate(expression)
        if let number = value as? Double { return number }
        if let number = value as? Int { return Double(number) }
        throw TestFailure("not a number: \(expression) is \(String(describing: value))")
    }

    /// Waits until the hub has acknowledged everything this page sent.
    public func settled() async throws {
        try await waitFor("touchsync.connected && touchsync.pending.length === 0")
    }

    /// A touch stroke of several fingers at once: down, `steps` moves, up (or cancel).
    public func multiTouch(fingers: Int, at origin: (x: Double, y: Double), steps: Int = 8, cancel: Bool = false) async throws {
        func points(_ step: Int) -> [(x: Double, y: Double, id: Int)] {
            (0..<fingers).map { finger in
                (origin.x + Double(finger) * 60 + Double(step) * 12, origin.y + Double(step) * 7 + Double(finger) * 15, finger)
            }
        }
        try await touch("touchStart", points(0))
        for step in 1...steps { try await touch("touchMove", points(step)) }
        try await touch(cancel ? "touchCancel" : "touchEnd", cancel ? [] : [])
    }

    /// A mouse or pen stroke.
    public func drag(from: (x: Double, y: Double), steps: Int = 10, pointerType: String = "mouse", force: Double? = nil, tilt: Double? = nil)
        async throws
    {
        try await pointer("mousePressed", x: from.x, y: from.y, pointerType: pointerType, force: force, tiltX: tilt, tiltY: tilt)
        for step in 1...steps {
            try await pointer(
                "mouseMoved", x: from.x + Double(step) * 15, y: from.y + Double(step * step), pointerType: pointerType, force: force,
                tiltX: tilt, tiltY: tilt)
        }
        try await pointer("mouseReleased", x: from.x + Double(steps) * 15, y: from.y + Double(steps * steps), pointerType: pointerType, force: force)
    }

    /// The colour of the pixel at (x, y) in a screenshot of the page, as [r, g, b].
    public func screenshotPixel(x: Int, y: Int, png: Data) async throws -> [Int] {
        let value = try await evaluate(
            """
            (async () => {
              const image = new Image();
              image.src = 'data:image/png;base64,\(png.base64EncodedString())';
              await image.decode();
              const canvas = document.createElement('canvas');
              canvas.width = image.width; canvas.height = image.height;
              const context = canvas.getContext('2d');
              context.drawImage(image, 0, 0);
              return Array.from(context.getImageData(\(x), \(y), 1, 1).data.slice(0, 3));
            })()
            """)
        return value as? [Int] ?? []
    }
}
