#!/usr/bin/env bash
# The configs a user copies from the documentation are valid: docs/configuration.md's example with
# every key (and each commented alternative in it), the README's example (also with its commented
# workflow in place of `stages: [train]`), and every config in configs/. Each must pass
# `strata plan`, which refuses what `strata run` refuses before it starts.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
root="$PWD"
cd "$work"
data="$root/data/fashion_mnist.h5"

# The first ```yaml block after the line that starts with $2, in file $1.
yaml_block() {
  awk -v start="$2" 'index($0, start) == 1 {found = 1} found && /^```yaml/ {inside = 1; next}
                     inside && /^```/ {exit} inside' "$1"
}
plans() {  # name, config file
  echo "$1:"
  expect_exit 0 'device: run.device' -- "$STRATA" plan "$2" --ranks 2 --set "data.path=$data"
}

yaml_block "$root/docs/configuration.md" "A complete example with every key" > full.yaml
[ "$(grep -c '^[a-z]*:' full.yaml)" -ge 8 ] || { echo "FAIL: no complete example found"; fails=$((fails + 1)); }
plans "configuration.md's example" full.yaml
# Each commented alternative (`# optimizer: {...}`, `# schedule: {...}`) in place of the line above.
while IFS=: read -r line _; do
  key="$(sed -n "${line}p" full.yaml | sed -E 's/^  # ([a-z]+):.*/\1/')"
  sed -E -e "/^  $key: \{/d" -e "${line}s/^  # /  /" -e "${line}s/ +\(defaults:.*//" full.yaml > "alt_$line.yaml"
  plans "configuration.md's $key alternative" "alt_$line.yaml"
done < <(grep -nE '^  # (optimizer|schedule): \{' full.yaml)

yaml_block "$root/README.md" "## Configuration by example" > readme.yaml
[ -s readme.yaml ] || { echo "FAIL: no example in README.md"; fails=$((fails + 1)); }
plans "README's example" readme.yaml
# Its commented workflow, with the search parameter it mentions in the optimizer.
sed -E -e '/^stages: \[train\]/d' -e 's/^# (stages:)/\1/' -e 's/^#(   - )/\1/' -e 's/^#(     #)/\1/' \
  -e 's/lr: 0\.05,/lr: $lr,/' readme.yaml > readme_workflow.yaml
grep -qE '^ +- transfer:' readme_workflow.yaml || { echo "FAIL: README's workflow not found"; fails=$((fails + 1)); }
plans "README's workflow" readme_workflow.yaml

for config in "$root"/configs/*.yaml; do plans "$(basename "$config")" "$config"; done
finish
