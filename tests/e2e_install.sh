#!/usr/bin/env bash
# e2e_install.sh - libkvlab as someone else's program sees it: `make install`
# into a temporary DESTDIR, then, with nothing but what was installed and
# `pkg-config --cflags --libs kvlab` (PKG_CONFIG_SYSROOT_DIR pointing
# pkg-config at the DESTDIR), compile each public header alone, then build
# and run tests/install_example.c, which creates a cache of every registered
# strategy, appends, views and runs kv_attn against kv_attn_ref.
#
# (That every declared function is in the archive and survives all-zero
# arguments: tests/e2e_linkall.sh.)
#
# Run by `make test` with the build it tests (KV_MAKE_ARGS: SANITIZE,
# PORTABLE, BUILD of the calling make; KV_TEST_LDFLAGS: the sanitizers' link
# flags); by hand it installs the default build.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
pass() { echo "  ok  $*"; }
flunk() { echo "FAIL  $*"; fail=1; }
CC=${CC:-cc}
prefix=/usr/local
dest="$tmp/dest"

# 0. a CFLAGS of the user's replaces the optimisation flags only: the
#    required ones (KV_REQ_CFLAGS) stay in every compile and link line
#    (a dry run of the default build; make exports the caller's command-line
#    variables, SANITIZE=1 among them, so they are set here)
line=$(env -u MAKEFLAGS -u MAKELEVEL make -n -B SANITIZE= PORTABLE= BUILD=build CFLAGS=-O2 \
       LDFLAGS=-s CPPFLAGS=-DX=1 build/obj/kernels/kv_common.o build/kvlab 2>/dev/null)
cc_line=$(printf '%s\n' "$line" | grep -m1 -- '-c kernels/kv_common.c')
ld_line=$(printf '%s\n' "$line" | grep -m1 -- '-o build/kvlab')
ok=1
for f in -O2 -DX=1 -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp -Wall -Werror -MMD; do
    case " $cc_line " in *" $f "*) ;; *) ok=0; echo "      compile line lacks $f: $cc_line";; esac
done
case " $cc_line " in *" -O3 "*) ok=0; echo "      CFLAGS=-O2 kept -O3: $cc_line";; esac
for f in -s -fopenmp; do
    case " $ld_line " in *" $f "*) ;; *) ok=0; echo "      link line lacks $f: $ld_line";; esac
done
[ "$ok" = 1 ] && pass "make CFLAGS=-O2 LDFLAGS=-s CPPFLAGS=-DX=1 keeps -std=c11 -fopenmp ... and adds them" ||
    flunk "user flags replaced required ones"

# 1. install (the build is already there: make test built it)
# shellcheck disable=SC2086
if env -u MAKEFLAGS -u MAKELEVEL make --no-print-directory ${KV_MAKE_ARGS:-} install \
    DESTDIR="$dest" PREFIX="$prefix" >"$tmp/install.log" 2>&1; then
    pass "make install DESTDIR=... PREFIX=$prefix"
else
    tail -n 5 "$tmp/install.log"
    flunk "make install failed"
    exit 1
fi
root="$dest$prefix"
for f in lib/libkvlab.a lib/pkgconfig/kvlab.pc include/kvlab/kvlab.h \
         include/kvlab/kernels/kv_attention.h include/kvlab/strategies/strategy.h \
         include/kvlab/bench/model/kv_model.h bin/kvlab; do
    [ -f "$root/$f" ] && pass "installed $f" || flunk "missing $f"
done
# no CLI object in the library, no internal header installed
if ar t "$root/lib/libkvlab.a" | grep -q -E '^(main|cmd_[a-z_]+|sweep|compare|csv_read|merge)\.o$'; then
    flunk "libkvlab.a holds CLI objects: $(ar t "$root/lib/libkvlab.a" | grep -E '^(main|cmd_|sweep|compare|csv_read|merge)' | tr '\n' ' ')"
else
    pass "libkvlab.a holds no CLI object ($(ar t "$root/lib/libkvlab.a" | wc -l) objects)"
fi
internal=$(cd "$root/include/kvlab" && ls kernels/kv_attention_impl.h kernels/kv_rows.h kernels/kv_simd.h \
           kernels/kv_half.h strategies/kv_store.h 2>/dev/null)
[ -z "$internal" ] && pass "no internal header installed" || flunk "internal headers installed: $internal"

# 2. pkg-config sees the DESTDIR
export PKG_CONFIG_PATH="$root/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest"
if flags=$(pkg-config --cflags --libs kvlab 2>"$tmp/pc.err"); then
    pass "pkg-config --cflags --libs kvlab: $flags"
else
    flunk "pkg-config kvlab: $(cat "$tmp/pc.err")"
    exit 1
fi
case "$flags" in *"-I$root/include"*"-lkvlab"*) pass "flags name the installed include dir and -lkvlab";;
    *) flunk "flags lack -I$root/include or -lkvlab";; esac

# 3. every public header compiles on its own, from the installed tree only
nh=0
ninst=$(find "$root/include/kvlab" -name '*.h' | wc -l)
while IFS= read -r h; do
    rel=${h#"$root/include/"}
    printf '#include <%s>\nint main(void) { return 0; }\n' "$rel" >"$tmp/one.c"
    # shellcheck disable=SC2086
    if "$CC" -std=c11 -Wall -Wextra -Werror -fsyntax-only $(pkg-config --cflags kvlab) \
        -nostdinc -isystem "$(dirname "$("$CC" -print-libgcc-file-name)")/include" \
        -isystem /usr/include/x86_64-linux-gnu -isystem /usr/include "$tmp/one.c" 2>"$tmp/one.err"; then
        nh=$((nh + 1))
    else
        flunk "<$rel> does not compile alone: $(head -n 2 "$tmp/one.err")"
    fi
done < <(find "$root/include/kvlab" -name '*.h' | sort)
[ "$nh" -ge 9 ] && [ "$nh" -eq "$ninst" ] &&
    pass "all $nh installed headers compile alone (-std=c11 -Wall -Wextra -Werror)" ||
    flunk "$nh of $ninst installed headers compiled"

# 4. a program of someone else's: built from the install only, then run
cp tests/install_example.c "$tmp/prog.c"
# shellcheck disable=SC2086
if "$CC" -std=c11 -O2 -Wall -Wextra -Werror ${KV_TEST_LDFLAGS:-} -o "$tmp/prog" "$tmp/prog.c" \
    $(pkg-config --cflags --libs kvlab) 2>"$tmp/cc.err"; then
    pass "tests/install_example.c builds with \$(pkg-config --cflags --libs kvlab) alone"
else
    cat "$tmp/cc.err" | head -n 10
    flunk "the example did not build against the installed library"
    exit 1
fi
if "$tmp/prog" >"$tmp/prog.out" 2>&1; then
    sed 's/^/      /' "$tmp/prog.out"
    n_ok=$(grep -c '^ok ' "$tmp/prog.out")
    [ "$n_ok" -ge 6 ] && pass "the example checked kv_attn against kv_attn_ref for $n_ok strategies" ||
        flunk "only $n_ok strategies checked"
else
    sed 's/^/      /' "$tmp/prog.out"
    flunk "the example failed"
fi
[ "$fail" -eq 0 ] && echo "e2e_install: passed" || echo "e2e_install: FAILED"
exit "$fail"
