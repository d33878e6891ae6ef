fn main() {
    std::process::exit(braids::cli::run());
}
