# Sourced by kernel-survey.sh and kernel-resources.sh: the numbers of
# ptxas's -v report (its text in $2) for the last function it reports.
#   ptxas_field FIELD LOG   FIELD: registers, barriers, or the words after
#                           the byte count ("bytes spill stores", "bytes
#                           spill loads", "bytes stack frame", "bytes smem");
#                           empty where the report has no such number
#   ptxas_notes LOG         its C75xx notes on the warpgroup MMAs, one each
ptxas_field() {
  case $1 in
    registers) sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' <<<"$2" | tail -1 ;;
    barriers) sed -n 's/.*used \([0-9]*\) barriers.*/\1/p' <<<"$2" | tail -1 ;;
    # [^0-9] before the number: a greedy .* would eat all but its last digit.
    *) sed -n "s/.*[^0-9]\([0-9][0-9]*\) $1.*/\1/p" <<<"$2" | tail -1 ;;
  esac
}
ptxas_notes() { grep -o 'C75[0-9][0-9]' <<<"$1" | sort -u | tr '\n' ' ' || true; }
