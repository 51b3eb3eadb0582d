# Shared by scripts/setup, scripts/test and scripts/bench: toolchain on PATH, Debian packages.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# The Swift toolchain lives in /opt/swift on these machines; a login shell may not have it.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
    export PATH="/opt/swift/usr/bin:$PATH"
fi

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# install_packages PKG...: installs the Debian packages that are missing; quick when none are.
install_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        echo "installing Debian packages: ${missing[*]}"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

BUILD_PACKAGES=(libfuse3-dev libsodium-dev fuse3 pkg-config libsqlite3-dev libssl-dev libsystemd-dev libpq-dev libpam0g-dev libtss2-dev liburing-dev)

# Builds pam_keychainfs.so (configuration: debug or release) and installs it where this
# machine's PAM modules are (beside pam_unix.so: /lib/x86_64-linux-gnu/security on Debian).
install_pam_module() {
    local configuration=$1 directory
    swift build -c "$configuration" --product pam_keychainfs
    directory=$(dirname "$(find /lib /usr/lib /lib64 /usr/lib64 -maxdepth 3 -name pam_unix.so -path '*/security/*' 2>/dev/null | head -n 1)")
    if [ "$directory" = . ]; then echo "no PAM module directory (pam_unix.so) found" >&2; return 1; fi
    as_root install -m 0644 "$(swift build -c "$configuration" --show-bin-path)/libpam_keychainfs.so" "$directory/pam_keychainfs.so"
}
