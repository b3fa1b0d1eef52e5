# bash completion for zeromem. Installed to
# <prefix>/share/bash-completion/completions/zeromem; or source it by hand:
#   source scripts/completion/zeromem.bash
# Flags are read from `zeromem <subcommand> --help`, preset names from
# `zeromem models|gpus|interconnects`, so they follow the installed version.
_zeromem() {
    local cur prev sub
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    sub="${COMP_WORDS[1]}"
    local subs="estimate compare plan fit models gpus interconnects"
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$subs --help --version" -- "$cur"))
        return
    fi
    case "$prev" in
        --model) COMPREPLY=($(compgen -W "$(zeromem models 2>/dev/null | awk '{print $1}')" -- "$cur")); return ;;
        --gpu) COMPREPLY=($(compgen -W "$(zeromem gpus 2>/dev/null | awk '{print $1}')" -- "$cur")); return ;;
        --interconnect|--network)
            COMPREPLY=($(compgen -W "$(zeromem interconnects 2>/dev/null | awk '{print $1}')" -- "$cur")); return ;;
        --hf-config) COMPREPLY=($(compgen -f -- "$cur") $(compgen -d -- "$cur")); return ;;
        --ds-config|--emit|--stack-from) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --stack) COMPREPLY=($(compgen -W "auto defaults deepspeed= torch= transformers=" -- "$cur")); return ;;
        --format) COMPREPLY=($(compgen -W "table json csv md" -- "$cur")); return ;;
        --stage) COMPREPLY=($(compgen -W "0 1 2 3" -- "$cur")); return ;;
        --dtype|--load-dtype) COMPREPLY=($(compgen -W "bf16 fp16 fp32" -- "$cur")); return ;;
        --offload-optimizer|--offload-param) COMPREPLY=($(compgen -W "none cpu nvme" -- "$cur")); return ;;
        --gradient-checkpointing) COMPREPLY=($(compgen -W "none full selective" -- "$cur")); return ;;
        --optimizer) COMPREPLY=($(compgen -W "adamw adam sgd" -- "$cur")); return ;;
        --optimizer-impl) COMPREPLY=($(compgen -W "torch fused" -- "$cur")); return ;;
        --attention) COMPREPLY=($(compgen -W "flash eager" -- "$cur")); return ;;
        --convention) COMPREPLY=($(compgen -W "full deepspeed paper" -- "$cur")); return ;;
        --for) COMPREPLY=($(compgen -W "deepspeed hf-trainer" -- "$cur")); return ;;
        --load-in) COMPREPLY=($(compgen -W "4bit 8bit" -- "$cur")); return ;;
    esac
    if [[ "$cur" == -* ]]; then
        local flags
        flags="$(zeromem "$sub" --help 2>/dev/null | grep -o -- '--[a-z0-9][a-z0-9-]*' | sort -u)"
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    fi
}
complete -F _zeromem zeromem
