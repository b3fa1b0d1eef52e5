#!/usr/bin/env bash
# Every C++ source of the project stays within 800 lines (docs/architecture.md: "files stay under about
# 600 lines, none over 800"). Prints each file over the limit and fails.
set -u
root=${1:?usage: file_size_test.sh SOURCE_DIR}
limit=800
over=0
while IFS= read -r f; do
    n=$(wc -l < "$f")
    if [ "$n" -gt "$limit" ]; then
        echo "${f#"$root"/}: $n lines (more than $limit)"
        over=1
    fi
done < <(find "$root/estimator" "$root/simulator" "$root/runtime" "$root/cli" "$root/gui" "$root/tests" \
              -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' \) | sort)
exit $over
