/* exercises_05.h - chapter 05's exercises (filled in by the chapter). */
