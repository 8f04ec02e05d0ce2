import Foundation

/// The repository's top folder (this file is Tests/TestSupport/RepositoryRoot.swift).
public let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
