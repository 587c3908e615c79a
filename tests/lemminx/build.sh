#!/bin/sh
# Build Eclipse LemMinX for tests/test_editors.py from a source checkout, with its dependencies
# from Maven Central (LemMinX itself is published only on repo.eclipse.org):
#   tests/lemminx/build.sh /path/to/lemminx [OUT]     (OUT: ~/.cache/vmtune-test-lemminx)
# Needs a JDK (17) and Maven; about 2 minutes.
set -eu
src=$(cd "$1" && pwd)/org.eclipse.lemminx/src/main
out=${2:-$HOME/.cache/vmtune-test-lemminx}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/classes"
mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies -DoutputDirectory="$out"
cp -r "$src/java" "$work/java"
# javax.annotation.Nullable comes with guava's optional jsr305, left out above; it is only a marker.
sed -i 's/^import javax.annotation.Nullable;//; s/@Nullable //' "$work/java/org/eclipse/lemminx/services/XMLRename.java"
find "$work/java" -name '*.java' > "$work/sources"
javac -nowarn -encoding UTF-8 -d "$work/classes" -cp "$(ls "$out"/*.jar | tr '\n' ':')" @"$work/sources"
cp -r "$src/resources/." "$work/classes/"
# Maven's git-commit-id plugin writes git.properties, which LemMinX reads at start-up.
version=$(sed -n 's|^\t<version>\(.*\)</version>|\1|p' "$src/../../../pom.xml" | head -1)
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
printf 'git.build.version=%s\ngit.commit.id.abbrev=%s\ngit.commit.message.short=\ngit.branch=main\n' \
  "$version" "$commit" > "$work/classes/git.properties"
jar cf "$out/org.eclipse.lemminx.jar" -C "$work/classes" .
echo "$out"
