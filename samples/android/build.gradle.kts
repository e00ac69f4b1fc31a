// Versions pinned here and in app/build.gradle.kts; Gradle's own in gradle/wrapper.
plugins {
    id("com.android.application") version "8.7.3" apply false
    id("org.jetbrains.kotlin.android") version "2.0.21" apply false
}
