# shellcheck shell=bash
# Sourced by the image's scripts (cgs-boot, cgs-assign). Their KEY=value files come from user data or an assignment,
# so they are read line by line here, never sourced.

# env_value FILE KEY: prints the value of KEY=value in FILE; fails when FILE has no such line.
env_value() {
  local line
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ "$line" == "$2="* ]]; then
      printf '%s' "${line#"$2="}"
      return 0
    fi
  done <"$1"
  return 1
}
