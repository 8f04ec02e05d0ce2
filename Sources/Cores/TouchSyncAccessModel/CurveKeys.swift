/// A CURVE key pair as Z85 text (40 characters each).
public struct CurveKeyPair: Sendable, Equatable {
    public let publicKey: String
    public let secretKey: String

    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }
}

/// What a CURVE client needs: its own key pair and the server's public key.
public struct CurveClientKeys: Sendable, Equatable {
    public var client: CurveKeyPair
    /// Z85, 40 characters.
    public var serverPublicKey: String

    public init(client: CurveKeyPair, serverPublicKey: String) {
        self.client = client
        self.serverPublicKey = serverPublicKey
    }
}
