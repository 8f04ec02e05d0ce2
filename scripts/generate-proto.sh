#!/usr/bin/env bash
# Regenerates Sources/Cores/TouchSyncWire/Generated from proto/ with Debian's protoc
# and protoc-gen-swift built from the swift-protobuf version Package.swift
# resolves. The output is committed, so builds never need protoc.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null 2>&1; then
  echo "protoc is missing: apt-get install protobuf-compiler" >&2
  exit 1
fi

# Build the plugin from the same swift-protobuf checkout the package uses, so
# generated code and runtime always match.
swift package resolve >/dev/null
checkout=.build/checkouts/swift-protobuf
plugin_dir=.build-protoc-gen-swift
echo "building protoc-gen-swift from $checkout (first time: a few minutes)"
swift build -c release --package-path "$checkout" --scratch-path "$plugin_dir" --product protoc-gen-swift >/dev/null
plugin="$plugin_dir/release/protoc-gen-swift"

out=Sources/Cores/TouchSyncWire/Generated
find "$out" -name '*.pb.swift' -delete
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_opt=Visibility=Public \
  --swift_out="$out" \
  -I proto $(find proto -name '*.proto' | sort)
echo "generated: $(find "$out" -name '*.pb.swift' | sort | tr '\n' ' ')"
