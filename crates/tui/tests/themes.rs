//! Every shipped theme renders with its own styles; every bad theme file fails with a message
//! naming the file, the key and what is wrong.

use chrono::{Offset, Utc};
use mcpscope_engine::fixtures::{scenario, scenario_now};
use mcpscope_engine::model::Model;
use mcpscope_tui::App;
use mcpscope_tui::theme::BUILTIN;
use mcpscope_tui::{Info, Theme, render_to_buffer};

#[test]
fn each_shipped_theme_styles_the_orphaned_row() {
    let model = Model::from_events(&scenario()).0;
    for (name, _) in BUILTIN {
        let theme = Theme::load(name).expect("builtin loads");
        let mut app = App::new(Info::default(), theme.clone(), Utc.fix());
        // Select another row so the orphan's row shows its own style, not the selection's.
        app.sync(&model);
        app.select_row(&model, 2);
        let buf = render_to_buffer(&mut app, &model, scenario_now(), 140, 40);
        let y = (0..buf.area.height)
            .find(|&y| {
                let line: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
                line.contains("tools/call poke") && line.contains("orphaned")
            })
            .expect("orphaned row on screen");
        let line: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        let x = line
            .find("tools/call poke")
            .map(|i| line[..i].chars().count())
            .expect("x") as u16;
        let cell = &buf[(x, y)];
        assert_eq!(
            cell.fg,
            theme.orphaned().fg.expect("orphaned has a colour"),
            "{name}"
        );
        assert!(
            cell.modifier.contains(theme.orphaned().add_modifier),
            "{name}"
        );
    }
}

#[test]
fn high_contrast_uses_no_red_or_green() {
    use ratatui::style::Color;
    let theme = Theme::load("high-contrast").expect("loads");
    for key in mcpscope_tui::theme::KEYS {
        let style = theme.get(key);
        for c in [style.fg, style.bg].into_iter().flatten() {
            assert!(
                !matches!(
                    c,
                    Color::Red | Color::Green | Color::LightRed | Color::LightGreen
                ),
                "{key} uses {c:?}"
            );
        }
    }
    assert_ne!(theme.orphaned(), theme.pending());
}

/// The panes take their plain text's colour from the screen's base style, laid under them
/// before they draw: no cell of any screen is left in the terminal's own colour, whichever
/// pane, overlay or size.
#[test]
fn every_cell_of_every_screen_has_a_colour_of_the_theme() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::style::Color;
    let model = Model::from_events(&scenario()).0;
    let keys = [
        None,
        Some(KeyCode::Down),
        Some(KeyCode::Tab),
        Some(KeyCode::Down),
        Some(KeyCode::Enter),
        Some(KeyCode::Tab),
        Some(KeyCode::Char('w')),
        Some(KeyCode::Char('z')),
        Some(KeyCode::Char('S')),
        Some(KeyCode::Char('?')),
    ];
    for (name, _) in BUILTIN {
        let theme = Theme::load(name).expect("builtin loads");
        let mut app = App::new(Info::default(), theme, Utc.fix());
        app.sync(&model);
        let mut screens = std::collections::HashSet::new();
        for key in keys {
            if let Some(code) = key {
                app.handle_key(KeyEvent::new(code, KeyModifiers::NONE), &model);
            }
            for (width, height) in [(140, 40), (90, 25)] {
                let buf = render_to_buffer(&mut app, &model, scenario_now(), width, height);
                let text: String = buf.content.iter().map(|c| c.symbol()).collect();
                screens.insert(text);
                for y in 0..height {
                    for x in 0..width {
                        assert_ne!(
                            buf[(x, y)].fg,
                            Color::Reset,
                            "{name}, after {key:?}, {width}x{height}: cell ({x}, {y}) has no colour"
                        );
                    }
                }
            }
        }
        // The keys did change what was drawn: these are different screens.
        assert!(screens.len() >= 10, "{name}: {} screens", screens.len());
    }
}

#[test]
fn t_cycles_themes() {
    let model = Model::new();
    let mut app = App::new(Info::default(), Theme::dark(), Utc.fix());
    let key = ratatui::crossterm::event::KeyEvent::new(
        ratatui::crossterm::event::KeyCode::Char('t'),
        ratatui::crossterm::event::KeyModifiers::NONE,
    );
    app.handle_key(key, &model);
    assert_eq!(app.theme().name, "light");
    app.handle_key(key, &model);
    assert_eq!(app.theme().name, "high-contrast");
    app.handle_key(key, &model);
    assert_eq!(app.theme().name, "dark");
}

fn load(body: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.toml");
    std::fs::write(&path, body).expect("write");
    let name = path.display().to_string();
    let err = Theme::load(&name).map(|_| ()).expect_err("must fail");
    (name, err.to_string())
}

#[test]
fn bad_colour_names_the_file_key_and_colour() {
    let (file, msg) = load("orphaned = \"redd bold\"\n");
    assert_eq!(
        msg,
        format!("{file}: key \"orphaned\": unknown colour \"redd\"")
    );
}

#[test]
fn bad_hex_colour() {
    let (file, msg) = load("pending = \"#12345\"\n");
    assert_eq!(
        msg,
        format!("{file}: key \"pending\": bad hex colour \"#12345\" (expected #rrggbb)")
    );
}

#[test]
fn unknown_key() {
    let (file, msg) = load("orphand = \"red\"\n");
    assert!(
        msg.starts_with(&format!("{file}: unknown key \"orphand\" (known keys: ")),
        "{msg}"
    );
}

#[test]
fn value_not_a_string() {
    let (file, msg) = load("selection = 3\n");
    assert!(
        msg.starts_with(&format!("{file}: key \"selection\": expected a string")),
        "{msg}"
    );
}

#[test]
fn background_missing_after_on() {
    let (file, msg) = load("help = \"white on\"\n");
    assert_eq!(
        msg,
        format!("{file}: key \"help\": \"on\" must be followed by a background colour")
    );
}

#[test]
fn invalid_toml() {
    let (file, msg) = load("orphaned = \n");
    assert!(msg.starts_with(&format!("{file}: invalid TOML")), "{msg}");
}

#[test]
fn missing_file_or_unknown_name() {
    let err = Theme::load("no-such-theme")
        .map(|_| ())
        .expect_err("must fail");
    let msg = err.to_string();
    assert!(
        msg.starts_with("no-such-theme: cannot read theme file"),
        "{msg}"
    );
    assert!(msg.contains("dark, light, high-contrast"), "{msg}");
}

#[test]
fn a_partial_file_falls_back_to_dark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mine.toml");
    std::fs::write(&path, "orphaned = \"#ff00ff underline\"\n").expect("write");
    let theme = Theme::load(&path.display().to_string()).expect("loads");
    assert_eq!(
        theme.orphaned().fg,
        Some(ratatui::style::Color::Rgb(255, 0, 255))
    );
    assert_eq!(theme.pending(), Theme::dark().pending());
}
