/// `records completion bash|zsh|fish`: scripts that complete the CLI's options and subcommands.
enum Completion {
    static let options = ["-H", "--host", "-p", "--port", "-u", "--user", "-c", "--command", "-f", "--file", "--url", "--tls", "--tls-direct",
                          "--tls-ca", "--format", "--continue", "--connect-timeout", "--repeat", "--interval", "--where", "--version", "--help"]
    static let subcommands = ["export", "import", "watch", "codegen", "completion"]

    static func script(for shell: String) -> String? {
        let words = (options + subcommands).joined(separator: " ")
        switch shell {
        case "bash":
            return """
                # records completion for bash: source <(records completion bash)
                _records() {
                    local current=${COMP_WORDS[COMP_CWORD]} previous=${COMP_WORDS[COMP_CWORD-1]}
                    case "$previous" in
                        --format) COMPREPLY=($(compgen -W "table json csv" -- "$current")); return ;;
                        -f|--file|--tls-ca|import) COMPREPLY=($(compgen -f -- "$current")); return ;;
                        completion) COMPREPLY=($(compgen -W "bash zsh" -- "$current")); return ;;
                        codegen) COMPREPLY=($(compgen -W "swift" -- "$current")); return ;;
                    esac
                    COMPREPLY=($(compgen -W "\(words)" -- "$current"))
                }
                complete -F _records records

                """
        case "zsh":
            return """
                #compdef records
                # records completion for zsh: records completion zsh > "${fpath[1]}/_records"
                _records() {
                    case "${words[CURRENT-1]}" in
                        --format) compadd table json csv; return ;;
                        -f|--file|--tls-ca|import) _files; return ;;
                        completion) compadd bash zsh; return ;;
                        codegen) compadd swift; return ;;
                    esac
                    compadd -- \(words)
                }
                compdef _records records

                """
        case "fish":
            // fish takes each option apart: long ones without their dashes (-l), short ones (-s).
            let long = options.filter { $0.hasPrefix("--") }.map { "complete -c records -l \($0.dropFirst(2))" }
            let short = options.filter { !$0.hasPrefix("--") }.map { "complete -c records -s \($0.dropFirst())" }
            return (["# records completion for fish: records completion fish > ~/.config/fish/completions/records.fish",
                     "complete -c records -f",
                     "complete -c records -n '__fish_seen_argument -l format' -a 'table json csv'",
                     "complete -c records -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'",
                     "complete -c records -n '__fish_seen_subcommand_from codegen' -a 'swift'",
                     "complete -c records -n '__fish_seen_subcommand_from import' -F",
                     "complete -c records -n 'not __fish_seen_subcommand_from \(subcommands.joined(separator: " "))' -a '\(subcommands.joined(separator: " "))'"]
                    + long + short).joined(separator: "\n") + "\n"
        default:
            return nil
        }
    }
}
