#!/bin/sh
# Builds the Debian package: the release binary, then its man pages and shell completions
# generated from that binary, then `cargo deb` around them. Prints the package's path.
# Needs cargo-deb (`cargo install cargo-deb --locked`).
set -eu
cd "$(dirname "$0")/../../.."
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p libra >&2
assets="$target/release/libra-assets"
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$target/release/libra" man --out "$assets/man" >&2
gzip -9n "$assets"/man/*.1
"$target/release/libra" completions bash > "$assets/completions/libra.bash"
"$target/release/libra" completions zsh > "$assets/completions/_libra"
"$target/release/libra" completions fish > "$assets/completions/libra.fish"
cargo deb --no-build -p libra "$@" >&2
ls -t "$target"/debian/libra_*.deb | head -n 1
